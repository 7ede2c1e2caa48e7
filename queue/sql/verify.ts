// Verify: read-only checks that presented leases are current, several in one statement.
import { named } from '../../platform/named-sql.js';
import { rowsOf, type Executor } from '../../platform/sql.js';
import { staleLeaseError, unknownJobError, type QueueError } from '../errors.js';
import { currentOf, staleReason, toLease } from '../rules.js';
import { rowToJob } from '../rows.js';
import type { Job, LateFinishPolicy, Lease, Presented } from '../types.js';
import type { SqlDialect } from './dialects.js';
import { JOB_COLUMNS, JOBS_BY_IDS } from './get.js';

/**
 * The rows of the ids (get.ts). On PostgreSQL with the server's clock the same statement also
 * reads the clock (`statement_timestamp()`: one value for the whole statement, taken with its
 * snapshot), so the rows and `now` are of one instant.
 */
const ROWS = JOBS_BY_IDS;

const VERIFY = {
  sqlite: named<{ ids: string }>(ROWS.sqlite),
  postgres: named<{ ids: string }>(ROWS.postgres),
  // Without a row there is nothing to judge, so no `now` is needed either.
  postgresServerClock: named<{ ids: string }>(
    ROWS.postgres.replace(
      `SELECT ${JOB_COLUMNS}`,
      `SELECT ${JOB_COLUMNS}, floor(extract(epoch FROM statement_timestamp()) * 1000)::bigint AS now`,
    ),
  ),
};

/**
 * Each presented lease checked against its row (rules.staleReason): the lease, or the QueueError
 * `verify` throws for it, in the order asked. `now` is the process clock's, read once the rows
 * are; or, with `serverClock`, the database server's, read by the same statement.
 */
export async function verifyManyIn(
  executor: Executor,
  dialect: SqlDialect,
  serverClock: boolean,
  readNow: () => Promise<number>,
  policy: LateFinishPolicy,
  presented: ReadonlyArray<Presented & { id: string }>,
): Promise<Array<Lease | QueueError>> {
  const ids = JSON.stringify([...new Set(presented.map((p) => p.id))]);
  const statement = serverClock && dialect === 'postgres' ? VERIFY.postgresServerClock : VERIFY[dialect];
  const rows = rowsOf(await executor.raw(statement.sql, statement.bind({ ids })));
  const now = serverClock ? Number(rows[0]?.now) : await readNow();
  const jobs = new Map<string, Job>();
  for (const row of rows) jobs.set(String(row.id), rowToJob(row));
  return presented.map(({ id, owner, token }) => {
    const job = jobs.get(id);
    if (!job) return unknownJobError(id);
    const reason = staleReason(job, { owner, token }, now, policy);
    return reason ? staleLeaseError(id, reason, { owner, token }, currentOf(job)) : toLease(job);
  });
}
