// Cancel: a live job becomes `dead` with `deadReason: "cancelled"`; its holder is fenced out.
import { named } from '../../platform/named-sql.js';
import { rowsOf, type Executor } from '../../platform/sql.js';
import { jobFinishedError, QueueError, unknownJobError } from '../errors.js';
import { cancelDisposition } from '../rules.js';
import { rowToJob } from '../rows.js';
import type { Job } from '../types.js';
import { getIn, JOB_COLUMNS } from './get.js';
import { LIFECYCLE_TRIES } from './lifecycle.js';

/**
 * Invariant: only a live job (`pending` or `leased`) is cancelled, and its holder is fenced by
 * the status alone: every guarded write needs `leased`. Owner and token stay as history.
 */
const CANCEL = named<{ reason: string | null; now: number; id: string }>(
  `UPDATE queue_jobs
     SET status = 'dead', dead_reason = 'cancelled', lease_until = NULL,
         last_error = COALESCE(@reason, last_error), updated_at = @now
   WHERE id = @id AND status IN ('pending', 'leased')
   RETURNING ${JOB_COLUMNS}`,
);

/**
 * A refusal is read to tell the answers apart (rules.cancelDisposition): a dead job, cancelled
 * or not, is answered unchanged; a done one is `job_finished`.
 */
export async function cancelIn(trx: Executor, id: string, reason: string | undefined, now: number): Promise<Job> {
  for (let tries = 0; tries < LIFECYCLE_TRIES; tries++) {
    const rows = rowsOf(await trx.raw(CANCEL.sql, CANCEL.bind({ reason: reason ?? null, now, id })));
    if (rows[0]) return rowToJob(rows[0]);
    const job = await getIn(trx, id);
    if (!job) throw unknownJobError(id);
    const disposition = cancelDisposition(job);
    if (disposition === 'finished') throw jobFinishedError(job);
    if (disposition === 'unchanged') return job;
  }
  throw changingJobError(id, 'cancelled');
}

/**
 * The job kept changing between the write and the read that explains it. Thrown inside the write
 * transaction, before it changed anything: a 503 the caller retries.
 */
export function changingJobError(id: string, what: string): QueueError {
  return new QueueError(
    'queue_unavailable',
    `Job "${id}" kept changing under concurrent requests while it was being ${what}; retry the request.`,
    { id },
  );
}
