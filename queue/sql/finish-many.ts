// Finish many: several finishes of one owner judged at one `now` by one conditional UPDATE, the
// refused ones explained by one read, and with `next` one claim for the accepted ones.
import { named, type NamedStatement } from '../../platform/named-sql.js';
import { rowsOf, type Executor } from '../../platform/sql.js';
import { QueueError, staleLeaseError, unknownJobError } from '../errors.js';
import { currentOf, DEFAULT_LEASE_MS, staleReason } from '../rules.js';
import { rowToJob, toJsonText } from '../rows.js';
import type { Job, LateFinishPolicy, Lease } from '../types.js';
import { claimManyIn } from './claim.js';
import type { ByDialect, SqlDialect } from './dialects.js';
import { getManyIn, JOB_COLUMNS } from './get.js';
import { leaseGuard } from './guard.js';

export interface FinishItem {
  id: string;
  token: number;
  result: unknown;
}

/** The most leases one batch claims: as many as one claim takes (`POST /claims`' `max`). */
const MAX_NEXT = 100;

/**
 * The batch as a table from one bound JSON array (@items) of `{id, token, result}`, `result` as
 * the JSON text the row keeps: one SQL text for any number of finishes. Its columns are named
 * apart from queue_jobs' so that the guard's unqualified columns are the row's.
 */
const BATCH: ByDialect<string> = {
  sqlite: `SELECT value ->> '$.id' AS batch_id, value ->> '$.token' AS batch_token, value ->> '$.result' AS batch_result
      FROM json_each(@items)`,
  postgres: `SELECT id AS batch_id, token AS batch_token, result AS batch_result
      FROM jsonb_to_recordset(@items::jsonb) AS items(id text, token bigint, result text)`,
};

/**
 * Invariant: a row becomes `done` only when its own presented token and the batch's owner pass
 * the lease guard at @now: the same guard (guard.ts) as the single finish, with the id and token
 * taken from the batch's row of that job.
 */
const finishMany = (dialect: SqlDialect, policy: LateFinishPolicy) =>
  named<{ items: string; owner: string; now: number }>(
    `UPDATE queue_jobs SET status = 'done', result = batch.batch_result, updated_at = @now
     FROM (${BATCH[dialect]}) AS batch
     WHERE ${leaseGuard(policy, { id: 'batch.batch_id', token: 'batch.batch_token', owner: '@owner', now: '@now' })}
     RETURNING ${JOB_COLUMNS}`,
  );

type FinishMany = NamedStatement<{ items: string; owner: string; now: number }>;

const FINISH_MANY: ByDialect<Record<LateFinishPolicy, FinishMany>> = {
  sqlite: { reject: finishMany('sqlite', 'reject'), 'if-unclaimed': finishMany('sqlite', 'if-unclaimed') },
  postgres: { reject: finishMany('postgres', 'reject'), 'if-unclaimed': finishMany('postgres', 'if-unclaimed') },
};

/** The statement itself, for a test that holds it to the rule: its SQL and parameters. */
export function finishManyStatement(dialect: SqlDialect, policy: LateFinishPolicy): FinishMany {
  return FINISH_MANY[dialect][policy];
}

/**
 * Each item answered in the order given: the job as finished, or the QueueError the single
 * finish would have thrown for it (`unknown_job`, or `stale_lease` with the first reason
 * rules.staleReason finds). With `next`, up to one lease per accepted finish for `owner`, in
 * claim order, lasting `next.leaseMs` or as long as the first accepted finish's lease did.
 * The ids must be distinct. Runs inside one write transaction; PostgreSQL's has the rows locked.
 */
export async function finishManyIn(
  trx: Executor,
  dialect: SqlDialect,
  policy: LateFinishPolicy,
  owner: string,
  items: readonly FinishItem[],
  next: { leaseMs: number | undefined } | undefined,
  now: number,
): Promise<{ results: Array<Job | QueueError>; next: Lease[] }> {
  const repeated = items.find((item, i) => items.findIndex((other) => other.id === item.id) !== i);
  if (repeated) throw repeatedIdError(repeated.id);
  const batch = JSON.stringify(items.map(({ id, token, result }) => ({ id, token, result: toJsonText(result) })));
  const statement = FINISH_MANY[dialect][policy];
  const rows = rowsOf(await trx.raw(statement.sql, statement.bind({ items: batch, owner, now })));
  const finished = new Map(rows.map((row) => [String(row.id), rowToJob(row)]));
  const refusedIds = items.filter((item) => !finished.has(item.id)).map((item) => item.id);
  // Read only to say why, as after a refused single finish (get.ts explainRefusal).
  const refused = refusedIds.length > 0 ? await getManyIn(trx, dialect, refusedIds) : new Map<string, Job>();
  const results = items.map(({ id, token }): Job | QueueError => {
    const done = finished.get(id);
    if (done) return done;
    const job = refused.get(id);
    if (!job) return unknownJobError(id);
    const presented = { owner, token };
    return staleLeaseError(id, staleReason(job, presented, now, policy) ?? 'lease_expired', presented, currentOf(job));
  });
  if (!next || finished.size === 0) return { results, next: [] };
  const first = results.find((result): result is Job => !(result instanceof QueueError))!;
  const leaseMs = next.leaseMs ?? first.leaseMs ?? DEFAULT_LEASE_MS;
  const leases = await claimManyIn(trx, dialect, owner, leaseMs, Math.min(finished.size, MAX_NEXT), now);
  return { results, next: leases };
}

/** One job twice in a batch: its two finishes would race each other inside one statement. */
export function repeatedIdError(id: string): QueueError {
  return new QueueError(
    'invalid_request',
    `Job "${id}" appears more than once in the batch; give each job at most one finish per request.`,
    { id },
  );
}
