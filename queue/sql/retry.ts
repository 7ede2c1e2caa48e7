// Retry: a dead job back to `pending` with a fresh budget of attempts.
import { named } from '../../platform/named-sql.js';
import { rowsOf, type Executor } from '../../platform/sql.js';
import { notDeadError, retryDeadlineError, unknownJobError } from '../errors.js';
import { retryRefusal } from '../rules.js';
import { rowToJob } from '../rows.js';
import type { Job, RetryInput } from '../types.js';
import { changingJobError } from './cancel.js';
import { getIn, JOB_COLUMNS } from './get.js';
import { LIFECYCLE_TRIES } from './lifecycle.js';

/**
 * Invariant: only a dead job whose deadline is ahead is retried (rule 4 would quarantine it
 * again), and the token is not in the SET list: it is never reset, so every holder from before
 * the job died stays fenced, in the queue and at the receiver.
 */
const RETRY = named<{ maxAttempts: number | null; runAt: number; now: number; id: string }>(
  `UPDATE queue_jobs
     SET status = 'pending', owner = NULL, lease_until = NULL, attempts = 0, dead_reason = NULL,
         max_attempts = COALESCE(@maxAttempts, max_attempts), run_at = @runAt, updated_at = @now
   WHERE id = @id AND status = 'dead' AND (deadline IS NULL OR deadline > @now)
   RETURNING ${JOB_COLUMNS}`,
);

/** A refusal is read only to say why (rules.retryRefusal). */
export async function retryIn(trx: Executor, id: string, input: RetryInput, now: number): Promise<Job> {
  for (let tries = 0; tries < LIFECYCLE_TRIES; tries++) {
    const rows = rowsOf(
      await trx.raw(
        RETRY.sql,
        RETRY.bind({ maxAttempts: input.maxAttempts ?? null, runAt: input.runAt ?? now, now, id }),
      ),
    );
    if (rows[0]) return rowToJob(rows[0]);
    const job = await getIn(trx, id);
    if (!job) throw unknownJobError(id);
    const refusal = retryRefusal(job, now);
    if (refusal === 'not_dead') throw notDeadError(job);
    if (refusal === 'deadline_passed') throw retryDeadlineError(job, now);
  }
  throw changingJobError(id, 'retried');
}
