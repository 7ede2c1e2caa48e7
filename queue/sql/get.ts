// Reading one job by id, and the refusal that reading explains after a guarded write refused.
import { named, type NamedStatement } from '../../platform/named-sql.js';
import { rowsOf, type Executor } from '../../platform/sql.js';
import { staleLeaseError, unknownJobError } from '../errors.js';
import { currentOf, staleReason } from '../rules.js';
import { rowToJob } from '../rows.js';
import type { Job, LateFinishPolicy, Presented } from '../types.js';
import type { ByDialect, SqlDialect } from './dialects.js';

/** Every column a Job is made of (queue/rows.ts maps them). */
export const JOB_COLUMNS = `seq, id, qty, payload, status, owner, token, attempts, max_attempts, priority, lease_ms,
  lease_until, deadline, run_at, result, last_error, dead_reason, created_at, updated_at`;

const GET = named<{ id: string }>(`SELECT ${JOB_COLUMNS} FROM queue_jobs WHERE id = @id`);

export async function getIn(executor: Executor, id: string): Promise<Job | null> {
  const row = rowsOf(await executor.raw(GET.sql, GET.bind({ id })))[0];
  return row ? rowToJob(row) : null;
}

/** The rows of the ids in one bound JSON array of strings (@ids), so one SQL text serves any count. */
export const JOBS_BY_IDS: ByDialect<string> = {
  sqlite: `SELECT ${JOB_COLUMNS} FROM queue_jobs WHERE id IN (SELECT value FROM json_each(@ids))`,
  postgres: `SELECT ${JOB_COLUMNS} FROM queue_jobs WHERE id IN (SELECT jsonb_array_elements_text(@ids::jsonb))`,
};

const GET_MANY: ByDialect<NamedStatement<{ ids: string }>> = {
  sqlite: named(JOBS_BY_IDS.sqlite),
  postgres: named(JOBS_BY_IDS.postgres),
};

/** The jobs of `ids` that exist, by id: one statement whatever their number. */
export async function getManyIn(
  executor: Executor,
  dialect: SqlDialect,
  ids: readonly string[],
): Promise<Map<string, Job>> {
  const statement = GET_MANY[dialect];
  const rows = rowsOf(await executor.raw(statement.sql, statement.bind({ ids: JSON.stringify(ids) })));
  return new Map(rows.map((row) => [String(row.id), rowToJob(row)]));
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
