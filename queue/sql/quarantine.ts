// Quarantine (rules 4 and 5): a live job that may no longer be given a token becomes `dead`
// before any token is issued. On PostgreSQL the claim statement itself does it (claim.ts); on
// SQLite a sweep runs first in the claim's write transaction.
import { named } from '../../platform/named-sql.js';
import type { Executor } from '../../platform/sql.js';

/**
 * Rules 4 and 5 at `now` (an SQL expression), over the columns of a queue_jobs row: its deadline
 * has passed, or its lease expired with its attempts spent. The one encoding of "may no longer
 * be given a token": the claim makes these rows dead and its pick leaves them out.
 */
export function quarantinable(now: string): string {
  return `((status IN ('pending', 'leased') AND deadline IS NOT NULL AND deadline <= ${now})
    OR (status = 'leased' AND lease_until <= ${now} AND attempts >= max_attempts))`;
}

/** The predicate at the parameter @now: what tests hold equal to rules.claimDisposition. */
export const QUARANTINABLE = quarantinable('@now');

/** Why a quarantinable row dies at `now`: the deadline first, as rules.claimDisposition says. */
export function deadReason(now: string): string {
  return `CASE WHEN deadline IS NOT NULL AND deadline <= ${now} THEN 'deadline_passed' ELSE 'attempts_exhausted' END`;
}

/**
 * SQLite's sweep: the write transaction already excludes every other writer. Measured against
 * folding it into the claim's UPDATE (a CASE per column and the quarantinable rows in its IN
 * list), the sweep once per transaction cost less CPU per job: a group commit's claims share it.
 */
const SWEEP = named<{ now: number }>(
  `UPDATE queue_jobs
     SET status = 'dead', lease_until = NULL, updated_at = @now, dead_reason = ${deadReason('@now')}
   WHERE seq IN (SELECT seq FROM queue_jobs WHERE ${QUARANTINABLE})`,
);

export async function quarantineIn(trx: Executor, now: number): Promise<void> {
  await trx.raw(SWEEP.sql, SWEEP.bind({ now }));
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

export async function quarantineOnce(trx: Executor, now: number): Promise<void> {
  if (swept.get(trx) === now) return;
  await quarantineIn(trx, now);
  swept.set(trx, now);
}
