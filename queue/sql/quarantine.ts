// Quarantine (rules 4 and 5): a live job that may no longer be given a token becomes `dead`. Not
// a statement of its own: the claim (claim.ts) makes these rows dead in the same statement that
// leases the others, so no token is ever issued while a quarantinable row is left live.

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
