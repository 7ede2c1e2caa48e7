// Fail: the holder gives the job up with an error; back to `pending` after a backoff, or `dead`
// when its attempts are spent (rule 5). A read, then one guarded write.
import type { Executor } from '../../platform/sql.js';
import { unknownJobError } from '../errors.js';
import { failed } from '../rules.js';
import type { Job, LateFinishPolicy, Presented } from '../types.js';
import { getIn } from './get.js';
import { fencedUpdate, runFenced } from './fenced.js';

/**
 * Invariant: only the current holder fails the job (the lease guard), and the outcome computed
 * from the row it read still applies: `attempts = @attempts` refuses the write if the job changed
 * in between, so a read-then-write cannot let a stale holder through.
 */
const FAIL = fencedUpdate<{
  status: string;
  runAt: number;
  lastError: string | null;
  deadReason: string | null;
  attempts: number;
}>(
  `status = @status, run_at = @runAt, lease_until = NULL, last_error = @lastError, dead_reason = @deadReason,
   updated_at = @now`,
  'AND attempts = @attempts',
);

export async function failIn(
  trx: Executor,
  policy: LateFinishPolicy,
  id: string,
  presented: Presented,
  error: string,
  retryInMs: number | undefined,
  now: number,
): Promise<Job> {
  // The row is read only to compute the outcome (the backoff grows with attempts, rules.failed);
  // the guarded UPDATE below is what decides.
  const job = await getIn(trx, id);
  if (!job) throw unknownJobError(id);
  const next = failed(job, error, retryInMs, now);
  return runFenced(trx, FAIL, policy, id, presented, now, {
    status: next.status,
    runAt: next.runAt,
    lastError: next.lastError,
    deadReason: next.deadReason,
    attempts: job.attempts,
  });
}
