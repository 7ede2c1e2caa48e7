// Heartbeat: the holder renews its lease.
import type { Executor } from '../../platform/sql.js';
import type { Job, LateFinishPolicy, Presented } from '../types.js';
import { fencedUpdate, runFenced } from './fenced.js';

/**
 * Invariant: only the current holder renews (the lease guard), and a renewed lease never
 * outlives the deadline (rule 4). Without @leaseMs the lease is renewed for the length the
 * claim asked for.
 */
const HEARTBEAT = fencedUpdate<{ leaseMs: number | null }>(
  `lease_ms = COALESCE(@leaseMs, lease_ms),
   lease_until = CASE WHEN deadline IS NOT NULL AND deadline < @now + COALESCE(@leaseMs, lease_ms) THEN deadline
                      ELSE @now + COALESCE(@leaseMs, lease_ms) END,
   updated_at = @now`,
);

export function heartbeatIn(
  trx: Executor,
  policy: LateFinishPolicy,
  id: string,
  presented: Presented,
  leaseMs: number | undefined,
  now: number,
): Promise<Job> {
  return runFenced(trx, HEARTBEAT, policy, id, presented, now, { leaseMs: leaseMs ?? null });
}
