// What only a test may do to the queue, run by the store's write path: end a lease now, and
// erase every job. The service offers them only when started with `testMode: true`.
import { QueueError, unknownJobError } from './errors.js';
import { rowToJob } from './rows.js';
import type { Job } from './types.js';
import { rowsOf, type Executor } from '../platform/sql.js';

/**
 * The lease of `id` ends at `now`, the queue's clock: from this instant its holder is refused
 * (`lease_expired`) and the job is claimable (rule 2). Only a live lease moves, and only
 * earlier; the token, the owner and the deadline stay, so the next claim fences the holder as
 * any expiry does. A job that is not leased is refused with a sentence saying what it is.
 */
export async function expireLeaseIn(trx: Executor, id: string, now: number): Promise<Job> {
  const moved = rowsOf(
    await trx.raw(
      `UPDATE queue_jobs SET lease_until = ?, updated_at = ?
        WHERE id = ? AND status = 'leased' AND lease_until > ? RETURNING *`,
      [now, now, id, now],
    ),
  );
  if (moved[0]) return rowToJob(moved[0]);
  // Nothing moved: read the row only to say why (an expired lease is answered as it is).
  const row = rowsOf(await trx.raw('SELECT * FROM queue_jobs WHERE id = ?', [id]))[0];
  if (!row) throw unknownJobError(id);
  const job = rowToJob(row);
  if (job.status !== 'leased') {
    throw new QueueError('invalid_request', `Job "${id}" is ${job.status}, not leased: there is no lease to run out.`, {
      status: job.status,
    });
  }
  return job;
}

/** Every job erased: a fresh queue for the next test case. Tokens start again at 0. */
export async function eraseJobsIn(trx: Executor): Promise<void> {
  await trx.raw('DELETE FROM queue_jobs', []);
}
