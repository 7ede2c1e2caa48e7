// Reading one job by id, and the refusal that reading explains after a guarded write refused.
import { named } from '../../platform/named-sql.js';
import { rowsOf, type Executor } from '../../platform/sql.js';
import { staleLeaseError, unknownJobError } from '../errors.js';
import { currentOf, staleReason } from '../rules.js';
import { rowToJob } from '../rows.js';
import type { Job, LateFinishPolicy, Presented } from '../types.js';

/** Every column a Job is made of (queue/rows.ts maps them). */
export const JOB_COLUMNS = `seq, id, qty, payload, status, owner, token, attempts, max_attempts, priority, lease_ms,
  lease_until, deadline, run_at, result, last_error, dead_reason, created_at, updated_at`;

const GET = named<{ id: string }>(`SELECT ${JOB_COLUMNS} FROM queue_jobs WHERE id = @id`);

export async function getIn(executor: Executor, id: string): Promise<Job | null> {
  const row = rowsOf(await executor.raw(GET.sql, GET.bind({ id })))[0];
  return row ? rowToJob(row) : null;
}

/**
 * Reads the row after a refused guarded write, only to say why: 404, or 409 stale_lease with the
 * first reason that applies (rules.staleReason).
 */
export async function explainRefusal(
  executor: Executor,
  policy: LateFinishPolicy,
  id: string,
  presented: Presented,
  now: number,
): Promise<never> {
  const job = await getIn(executor, id);
  if (!job) throw unknownJobError(id);
  const reason = staleReason(job, presented, now, policy) ?? 'lease_expired';
  throw staleLeaseError(id, reason, presented, currentOf(job));
}
