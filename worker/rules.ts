// The worker's decisions as pure functions: how often to renew, when the worker must assume
// its lease has ended, and which answers from the queue or the gateway mean "not yours any more".
import { GatewayError } from '../gateway/client.js';
import { QueueError } from '../queue/client.js';
import type { CurrentLease, Lease, StaleReason } from '../queue/types.js';
import type { LossReason } from './errors.js';
import type { WorkerEventBody } from './events.js';

/** A third of the lease, so two renewals can fail before it runs out; never more often than 10/s. */
export function heartbeatIntervalMs(leaseMs: number): number {
  return Math.max(100, Math.floor(leaseMs / 3));
}

/**
 * The worker's estimate of when the lease ends, on its own clock. The queue set
 * `leaseUntil = now + leaseMs` when the request reached it, which was after `sentAt`, so
 * `sentAt + leaseMs` never overshoots — and it needs no agreement between the two clocks.
 * Only when the deadline capped the lease (`leaseUntil === deadline`) is the queue's
 * `leaseUntil` itself used, which assumes the clocks roughly agree.
 */
export function estimateLeaseEnd(
  sentAt: number,
  leaseMs: number,
  lease: Pick<Lease, 'leaseUntil' | 'deadline'>,
): number {
  const byLength = sentAt + leaseMs;
  const capped = lease.deadline !== null && lease.leaseUntil >= lease.deadline;
  return capped ? Math.min(byLength, lease.leaseUntil) : byLength;
}

export interface Refusal {
  /** The service's error code: `stale_lease`, `unknown_job`, `fenced`. */
  code: string;
  status: number;
  reason: LossReason;
  current: CurrentLease | undefined;
  message: string;
}

const STALE_REASONS: ReadonlySet<string> = new Set<StaleReason>([
  'not_leased',
  'token_mismatch',
  'owner_mismatch',
  'deadline_passed',
  'lease_expired',
]);

/**
 * The answers that mean the lease is not this worker's any more: the queue's (or the
 * gateway's, on the queue's word) `stale_lease` and `unknown_job`, and the receiver's `fenced`
 * (it has seen a newer token for the job). Anything else — unreachable, 5xx, a conflict — is
 * not a verdict on the lease, and returns null.
 */
export function refusalOf(err: unknown): Refusal | null {
  if (!(err instanceof QueueError || err instanceof GatewayError)) return null;
  const details = err.details as { reason?: unknown; current?: unknown };
  switch (err.code) {
    case 'stale_lease': {
      const reason =
        typeof details.reason === 'string' && STALE_REASONS.has(details.reason)
          ? (details.reason as StaleReason)
          : 'not_leased';
      return { code: err.code, status: err.status, reason, current: currentOf(details.current), message: err.message };
    }
    case 'unknown_job':
      return { code: err.code, status: err.status, reason: 'unknown_job', current: undefined, message: err.message };
    case 'fenced':
      return { code: err.code, status: err.status, reason: 'fenced', current: undefined, message: err.message };
    default:
      return null;
  }
}

/** The timeline event for a refusal of `op`, with the service's verdict. */
export function refusedEvent(
  op: 'renew' | 'send' | 'finish' | 'fail',
  job: string,
  token: number,
  refusal: Refusal,
): WorkerEventBody {
  return {
    event: 'refused',
    op,
    job,
    token,
    status: refusal.status,
    code: refusal.code,
    reason: refusal.reason,
    ...(refusal.current ? { current: refusal.current } : {}),
    error: refusal.message,
  };
}

/**
 * A finish retried after a lost answer is refused as `not_leased` when the first attempt did
 * land: the job is `done` under this very owner and token. That is success, not a loss.
 */
export function finishedEarlierBy(refusal: Refusal, owner: string, token: number): boolean {
  const current = refusal.current;
  return (
    refusal.reason === 'not_leased' && current?.status === 'done' && current.owner === owner && current.token === token
  );
}

function currentOf(value: unknown): CurrentLease | undefined {
  if (!value || typeof value !== 'object') return undefined;
  const c = value as Partial<CurrentLease>;
  if (typeof c.status !== 'string' || typeof c.token !== 'number') return undefined;
  return { status: c.status, owner: c.owner ?? null, token: c.token, leaseUntil: c.leaseUntil ?? null };
}

/** What a handler's failure is recorded as: its message, or the value itself. */
export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message || err.name;
  return typeof err === 'string' ? err : (JSON.stringify(err) ?? String(err));
}
