// The quarantine sweep (rules 4 and 5): before any token is issued, every live job that may no
// longer be given one becomes `dead`.
import { named } from '../../platform/named-sql.js';
import type { Executor } from '../../platform/sql.js';
import type { ByDialect } from './dialects.js';

/**
 * Rules 4 and 5 at @now, over the columns of a queue_jobs row: its deadline has passed, or its
 * lease expired with its attempts spent. The one encoding of "may no longer be given a token":
 * the sweep makes these rows dead, and PostgreSQL's claim pick (claim.ts) leaves them out.
 */
export const QUARANTINABLE = `((status IN ('pending', 'leased') AND deadline IS NOT NULL AND deadline <= @now)
    OR (status = 'leased' AND lease_until <= @now AND attempts >= max_attempts))`;

/**
 * Invariant: no token is ever issued for a quarantinable job; each becomes `dead`, saying which
 * rule it fell to. PostgreSQL: concurrent claims each run the sweep, and skipping rows another
 * transaction holds means sweeps never wait on each other nor deadlock (the pick leaves out what
 * is skipped). SQLite: the write transaction already excludes every other writer.
 */
const sweep = (lock: string) =>
  named<{ now: number }>(
    `UPDATE queue_jobs
       SET status = 'dead', lease_until = NULL, updated_at = @now,
           dead_reason = CASE WHEN deadline IS NOT NULL AND deadline <= @now THEN 'deadline_passed'
                              ELSE 'attempts_exhausted' END
     WHERE seq IN (SELECT seq FROM queue_jobs WHERE ${QUARANTINABLE} ${lock})`,
  );

const SWEEP: ByDialect<ReturnType<typeof sweep>> = {
  sqlite: sweep(''),
  postgres: sweep('FOR UPDATE SKIP LOCKED'),
};

export async function quarantineIn(trx: Executor, dialect: keyof typeof SWEEP, now: number): Promise<void> {
  await trx.raw(SWEEP[dialect].sql, SWEEP[dialect].bind({ now }));
}

/**
 * Transactions whose sweep has run. Every write in one transaction shares one `now`, and
 * nothing written at `now` becomes due for quarantine at that same `now` (a new lease ends
 * after it, a passed deadline is refused at enqueue and at retry, a release needs the deadline
 * ahead, a fail spending the last attempt is dead already), so one sweep covers every claim a
 * group commit puts in the transaction. Keyed by the transaction's executor, which each
 * transaction gets anew.
 */
const swept = new WeakMap<Executor, number>();

export async function quarantineOnce(trx: Executor, dialect: keyof typeof SWEEP, now: number): Promise<void> {
  if (swept.get(trx) === now) return;
  await quarantineIn(trx, dialect, now);
  swept.set(trx, now);
}
