// Release: the holder gives the job back unworked, claimable now.
import type { Executor } from '../../platform/sql.js';
import type { Job, LateFinishPolicy, Presented } from '../types.js';
import { fencedUpdate, runFenced } from './fenced.js';

/**
 * Invariant: only the current holder releases (the lease guard, exactly as finish). The attempt
 * its claim spent is given back and nobody owns the job; the token is left alone, so the next
 * claim issues a higher one and the releasing holder stays fenced.
 */
const RELEASE = fencedUpdate<Record<string, never>>(
  `status = 'pending', owner = NULL, lease_until = NULL, run_at = @now,
   attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END, updated_at = @now`,
);

export function releaseIn(
  trx: Executor,
  policy: LateFinishPolicy,
  id: string,
  presented: Presented,
  now: number,
): Promise<Job> {
  return runFenced(trx, RELEASE, policy, id, presented, now, {});
}
