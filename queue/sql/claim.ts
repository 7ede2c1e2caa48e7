// Claim (rules 1, 4, 5, 6): quarantine first, then lease the best claimable jobs, up to `max`,
// in the same transaction. Only the chosen rows are written; each gets its own next token.
import { named } from '../../platform/named-sql.js';
import { rowsOf, type Executor, type Row } from '../../platform/sql.js';
import { leaseUntilFor, toLease } from '../rules.js';
import { rowToJob } from '../rows.js';
import type { Lease } from '../types.js';
import type { ByDialect, SqlDialect } from './dialects.js';
import { JOB_COLUMNS } from './get.js';
import { QUARANTINABLE, quarantineOnce } from './quarantine.js';

/** The `seq`s of the next claimable rows, best first: at most @max, at @now. */
const PICK: ByDialect<string> = {
  // Two index walks, each stopping after @max rows, then the best of those: pending jobs by
  // (priority, run_at, seq) and expired leases, so a claim never sorts the queue. The sweep ran
  // first under the write lock, so no quarantinable row is left to pick.
  sqlite: `SELECT seq FROM (
      SELECT * FROM (SELECT seq, priority, run_at FROM queue_jobs
        WHERE status = 'pending' AND run_at <= @now ORDER BY priority DESC, run_at, seq LIMIT @max)
      UNION ALL
      SELECT * FROM (SELECT seq, priority, run_at FROM queue_jobs
        WHERE status = 'leased' AND lease_until <= @now ORDER BY priority DESC, run_at, seq LIMIT @max)
    ) ORDER BY priority DESC, run_at, seq LIMIT @max`,
  // Each branch walks its own partial index and stops after @max rows it can lock; rows another
  // claim has locked are skipped, not waited for. The sweep skips locked rows too, so the pick
  // itself leaves out the rows the sweep would make dead (QUARANTINABLE, the same predicate).
  postgres: `WITH pending AS (
      SELECT seq, priority, run_at FROM queue_jobs
      WHERE status = 'pending' AND run_at <= @now AND NOT ${QUARANTINABLE}
      ORDER BY priority DESC, run_at, seq LIMIT @max
      FOR UPDATE SKIP LOCKED
    ), expired AS (
      SELECT seq, priority, run_at FROM queue_jobs
      WHERE status = 'leased' AND lease_until <= @now AND NOT ${QUARANTINABLE}
      ORDER BY priority DESC, run_at, seq LIMIT @max
      FOR UPDATE SKIP LOCKED
    )
    SELECT seq FROM (SELECT * FROM pending UNION ALL SELECT * FROM expired) AS best
    ORDER BY priority DESC, run_at, seq LIMIT @max`,
};

type ClaimParams = { owner: string; leaseMs: number; until: number; now: number; max: number };

/**
 * Invariant (rule 6): a job under a valid lease is never handed to anyone else. The WHERE clause
 * takes only rows claimable at @now — `pending` and due, or `leased` with `lease_until <= @now`
 * (rule 2: at `lease_until` the lease has ended) — whatever the pick chose; the token rises by
 * one, and the lease never outlives the deadline (rule 4).
 */
const claimStatement = (pick: string) =>
  named<ClaimParams>(
    `UPDATE queue_jobs
       SET status = 'leased', owner = @owner, token = token + 1, attempts = attempts + 1, lease_ms = @leaseMs,
           lease_until = CASE WHEN deadline IS NOT NULL AND deadline < @until THEN deadline ELSE @until END,
           updated_at = @now
     WHERE seq IN (${pick})
       AND ((status = 'pending' AND run_at <= @now) OR (status = 'leased' AND lease_until <= @now))
     RETURNING ${JOB_COLUMNS}`,
  );

const CLAIM: ByDialect<ReturnType<typeof claimStatement>> = {
  sqlite: claimStatement(PICK.sqlite),
  postgres: claimStatement(PICK.postgres),
};

/** The pick alone, for a plan or a test: its SQL and parameters on `dialect`. */
export function pickStatement(dialect: SqlDialect) {
  return named<{ now: number; max: number }>(PICK[dialect]);
}

/** Up to `max` leases for `owner`, in claim order; empty when none is claimable. */
export async function claimManyIn(
  trx: Executor,
  dialect: SqlDialect,
  owner: string,
  leaseMs: number,
  max: number,
  now: number,
): Promise<Lease[]> {
  await quarantineOnce(trx, dialect, now);
  const until = leaseUntilFor(now, leaseMs, null);
  const rows = rowsOf(await trx.raw(CLAIM[dialect].sql, CLAIM[dialect].bind({ owner, leaseMs, until, now, max })));
  // RETURNING has no order of its own: put the leases back in the order the pick chose them.
  rows.sort(byClaimOrder);
  return rows.map((row) => toLease(rowToJob(row)));
}

/** The claim's order: higher priority first, then earlier runAt, then order of enqueue. */
function byClaimOrder(a: Row, b: Row): number {
  return (
    Number(b.priority) - Number(a.priority) || Number(a.run_at) - Number(b.run_at) || Number(a.seq) - Number(b.seq)
  );
}
