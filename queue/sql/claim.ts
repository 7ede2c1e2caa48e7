// Claim (rules 1, 4, 5, 6): every quarantinable row made dead, then the best claimable jobs
// leased, up to `max`; each leased one gets its own next token. On PostgreSQL one statement does
// both; on SQLite the sweep runs once per write transaction (quarantine.ts), shared by the
// claims a group commit puts in it, and the claim is one UPDATE after it.
import { named } from '../../platform/named-sql.js';
import { rowsOf, type Executor, type Row } from '../../platform/sql.js';
import { toLease } from '../rules.js';
import { rowToJob } from '../rows.js';
import type { Lease } from '../types.js';
import type { ByDialect, SqlDialect } from './dialects.js';
import { JOB_COLUMNS } from './get.js';
import { deadReason, quarantinable, quarantineOnce } from './quarantine.js';

/**
 * The claim's `now` as SQL: a parameter, or (PostgreSQL with the server's clock) the statement's
 * own time, `statement_timestamp()`, one value however often the statement reads it, so the pick,
 * the guard and the values written all use one instant. The claim never waits for a lock (every
 * row it takes is taken SKIP LOCKED), so that instant is the one it writes at.
 */
const NOW = {
  param: '@now',
  // PostgreSQL infers a parameter's type from where it stands; `@now + @leaseMs` needs one.
  pgParam: 'CAST(@now AS bigint)',
  pgStatement: '(floor(extract(epoch FROM statement_timestamp()) * 1000)::bigint)',
};

/** The order of a claim: higher priority first, then earlier runAt, then order of enqueue. */
const ORDER = 'priority DESC, run_at, seq';

/**
 * SQLite's LIMIT: a bare `LIMIT ?` lets SQLite's planner read the bound value, and so marks the
 * statement to be prepared again at every new binding (sqlite3Reprepare, about 5% of the queue's
 * CPU in a run of `leasehold worker` when the claim was written so); a CAST is not read that way,
 * and the prepared claim is kept. The plan is the same either way (test/queue/sqlite-plan.test.ts).
 */
const SQLITE_LIMIT = 'CAST(@max AS INTEGER)';

/**
 * The `seq`s of the next claimable rows at `now`, best first, at most @max. Two index walks,
 * each stopping after @max rows, then the best of those: pending jobs by (priority, run_at, seq)
 * and expired leases, so a claim never sorts the queue. On PostgreSQL each walk skips rows
 * another claim has locked instead of waiting.
 */
function pick(now: string, lock: string, alive: string, limit = '@max'): { pending: string; expired: string } {
  return {
    pending: `SELECT seq, priority, run_at FROM queue_jobs
      WHERE status = 'pending' AND run_at <= ${now} ${alive} ORDER BY ${ORDER} LIMIT ${limit} ${lock}`,
    expired: `SELECT seq, priority, run_at FROM queue_jobs
      WHERE status = 'leased' AND lease_until <= ${now} ${alive} ORDER BY ${ORDER} LIMIT ${limit} ${lock}`,
  };
}

/** SQLite's pick: the sweep has run under the write lock, so no quarantinable row is left to skip. */
function sqlitePick(now: string): string {
  const { pending, expired } = pick(now, '', '', SQLITE_LIMIT);
  return `SELECT seq FROM (SELECT * FROM (${pending}) UNION ALL SELECT * FROM (${expired})) ORDER BY ${ORDER} LIMIT ${SQLITE_LIMIT}`;
}

/** PostgreSQL's pick leaves out what the same statement makes dead. */
function postgresPick(now: string): { pending: string; expired: string } {
  return pick(now, 'FOR UPDATE SKIP LOCKED', `AND NOT ${quarantinable(now)}`);
}

const claimable = (now: string) =>
  `(status = 'pending' AND run_at <= ${now}) OR (status = 'leased' AND lease_until <= ${now})`;

/**
 * SQLite: the sweep (quarantine.ts) has made the quarantinable rows dead in this transaction, so
 * the claim leases the picked rows alone, each claimable at `now` — `pending` and due, or
 * `leased` with `lease_until <= now` (rule 2: at `lease_until` the lease has ended) — whatever
 * the pick chose. The token rises by one, and the lease never outlives the deadline (rule 4).
 */
function sqliteClaim(now: string): string {
  const until = `${now} + @leaseMs`;
  return `UPDATE queue_jobs
     SET status = 'leased', owner = @owner, token = token + 1, attempts = attempts + 1, lease_ms = @leaseMs,
         lease_until = CASE WHEN deadline IS NOT NULL AND deadline < ${until} THEN deadline ELSE ${until} END,
         updated_at = ${now}
   WHERE seq IN (${sqlitePick(now)}) AND (${claimable(now)})
   RETURNING ${JOB_COLUMNS}`;
}

/**
 * PostgreSQL, invariant (rules 4, 5, 6): the rows written are the quarantinable ones, made dead,
 * and the picked ones, leased; a row is leased only when claimable at `now` and not
 * quarantinable, whatever the pick chose. Every SET reads the row as it was, so each CASE asks
 * the same question. Every row is locked by a CTE that skips rows other transactions hold, so
 * concurrent claims never wait on each other nor deadlock; a quarantinable row another claim
 * holds is that claim's to make dead, and no pick here takes it.
 */
function postgresClaim(now: string): string {
  const { pending, expired } = postgresPick(now);
  const dead = quarantinable(now);
  const until = `${now} + @leaseMs`;
  const leasedOr = (kept: string, leased: string) => `CASE WHEN ${dead} THEN ${kept} ELSE ${leased} END`;
  return `WITH spent AS MATERIALIZED (SELECT seq FROM queue_jobs WHERE ${dead} FOR UPDATE SKIP LOCKED),
    pending AS MATERIALIZED (${pending}),
    expired AS MATERIALIZED (${expired}),
    best AS (SELECT seq FROM (SELECT * FROM pending UNION ALL SELECT * FROM expired) AS b ORDER BY ${ORDER} LIMIT @max)
  UPDATE queue_jobs
     SET status = ${leasedOr(`'dead'`, `'leased'`)},
         owner = ${leasedOr('owner', '@owner')},
         token = ${leasedOr('token', 'token + 1')},
         attempts = ${leasedOr('attempts', 'attempts + 1')},
         lease_ms = ${leasedOr('lease_ms', '@leaseMs')},
         lease_until = CASE WHEN ${dead} THEN NULL
                            WHEN deadline IS NOT NULL AND deadline < ${until} THEN deadline ELSE ${until} END,
         dead_reason = ${leasedOr(deadReason(now), 'dead_reason')},
         updated_at = ${now}
   WHERE seq IN (SELECT seq FROM spent UNION ALL SELECT seq FROM best) AND (${dead} OR ${claimable(now)})
   RETURNING ${JOB_COLUMNS}`;
}

type ClaimParams = { owner: string; leaseMs: number; max: number };

const CLAIM = {
  sqlite: named<ClaimParams & { now: number }>(sqliteClaim(NOW.param)),
  postgres: named<ClaimParams & { now: number }>(postgresClaim(NOW.pgParam)),
  postgresStatementClock: named<ClaimParams>(postgresClaim(NOW.pgStatement)),
};

const PICK: ByDialect<string> = {
  sqlite: sqlitePick(NOW.param),
  postgres: (({ pending, expired }) =>
    `WITH pending AS (${pending}), expired AS (${expired})
     SELECT seq FROM (SELECT * FROM pending UNION ALL SELECT * FROM expired) AS b ORDER BY ${ORDER} LIMIT @max`)(
    postgresPick(NOW.pgParam),
  ),
};

/**
 * PostgreSQL: whether any row is claimable at `now`, held by another transaction or not. Asked
 * after a claim that took nothing, since its pick skips the rows other transactions hold: a
 * holder's write that is about to be refused (a stale heartbeat) holds its row for a moment,
 * and a claim then must not answer that nothing is claimable. The same two index walks as the
 * pick, one row each, without locking.
 */
function anyClaimable(now: string): string {
  const { pending, expired } = pick(now, '', `AND NOT ${quarantinable(now)}`, '1');
  return `SELECT EXISTS (${pending}) OR EXISTS (${expired}) AS found`;
}

const ANY_CLAIMABLE = {
  param: named<{ now: number }>(anyClaimable(NOW.pgParam)),
  statement: named<Record<string, never>>(anyClaimable(NOW.pgStatement)),
};

/** PostgreSQL: true when a row is claimable at `now` (null: the server's clock), locked or not. */
export async function anyClaimableIn(executor: Executor, now: number | null): Promise<boolean> {
  const rows =
    now === null
      ? rowsOf(await executor.raw(ANY_CLAIMABLE.statement.sql, ANY_CLAIMABLE.statement.bind({})))
      : rowsOf(await executor.raw(ANY_CLAIMABLE.param.sql, ANY_CLAIMABLE.param.bind({ now })));
  return rows[0]?.found === true;
}

/** The pick alone, for a plan or a test: its SQL and parameters on `dialect`. */
export function pickStatement(dialect: SqlDialect) {
  return named<{ now: number; max: number }>(PICK[dialect]);
}

/** The claim statement itself, for a plan: `now` null is PostgreSQL's statement clock. */
export function claimStatement(dialect: SqlDialect, clock: 'param' | 'statement' = 'param') {
  return dialect === 'postgres' && clock === 'statement' ? CLAIM.postgresStatementClock : CLAIM[dialect];
}

/**
 * Up to `max` leases for `owner`, in claim order; empty when none is claimable. `now` is the
 * queue's clock as the transaction read it, or null on PostgreSQL for the statement's own reading
 * of the server's clock (then no transaction is needed around it: it is one statement).
 */
export async function claimManyIn(
  trx: Executor,
  dialect: SqlDialect,
  owner: string,
  leaseMs: number,
  max: number,
  now: number | null,
): Promise<Lease[]> {
  let rows: Row[];
  if (now !== null) {
    if (dialect === 'sqlite') await quarantineOnce(trx, now);
    const statement = CLAIM[dialect];
    rows = rowsOf(await trx.raw(statement.sql, statement.bind({ owner, leaseMs, max, now })));
  } else if (dialect === 'postgres') {
    const statement = CLAIM.postgresStatementClock;
    rows = rowsOf(await trx.raw(statement.sql, statement.bind({ owner, leaseMs, max })));
  } else {
    throw new Error("Only PostgreSQL's claim reads the clock in its own statement; SQLite's needs a now.");
  }
  // The dead rows are the quarantine's; RETURNING has no order of its own, so the leases are put
  // back in the order the pick chose them.
  return rows
    .filter((row) => row.status === 'leased')
    .sort(byClaimOrder)
    .map((row) => toLease(rowToJob(row)));
}

/** The claim's order: higher priority first, then earlier runAt, then order of enqueue. */
function byClaimOrder(a: Row, b: Row): number {
  return (
    Number(b.priority) - Number(a.priority) || Number(a.run_at) - Number(b.run_at) || Number(a.seq) - Number(b.seq)
  );
}
