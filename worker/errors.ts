// The worker's one error class: the lease is no longer this worker's. It says how the worker
// found out (`during`), why (`reason`), what it presented (`expected`) and, when the queue or
// the gateway said so, what the job is now (`current`).
import type { CurrentLease, Presented, StaleReason } from '../queue/types.js';

/**
 * Why the lease is lost: the queue's own stale reasons, `cancelled` (the queue refused it as
 * `not_leased` and the job is `dead` with `deadReason: "cancelled"`), `unknown_job`, `fenced`
 * (the receiver has seen a higher token), `not_renewed` (no renewal succeeded before the
 * worker's estimate of `leaseUntil`), or `queue_unreachable` (a finish or fail could not reach
 * the queue in time).
 */
export type LossReason = StaleReason | 'cancelled' | 'unknown_job' | 'fenced' | 'not_renewed' | 'queue_unreachable';

/** The call that revealed the loss. */
export type LossDuring = 'renew' | 'send' | 'finish' | 'fail' | 'release';

export interface LeaseLostDetails {
  jobId: string;
  expected: Presented;
  during: LossDuring;
  reason: LossReason;
  current?: CurrentLease | undefined;
  /** The refusal's own message (queue or gateway), when there was one. */
  cause?: string | undefined;
}

export class LeaseLostError extends Error {
  override readonly name = 'LeaseLostError';
  readonly code = 'lease_lost';
  readonly jobId: string;
  readonly expected: Presented;
  readonly during: LossDuring;
  readonly reason: LossReason;
  readonly current: CurrentLease | undefined;

  constructor(details: LeaseLostDetails) {
    super(lossMessage(details), details.cause === undefined ? undefined : { cause: details.cause });
    this.jobId = details.jobId;
    this.expected = details.expected;
    this.during = details.during;
    this.reason = details.reason;
    this.current = details.current;
  }

  /** True when the queue (directly or through the gateway) said so, not the worker's own clock. */
  get confirmed(): boolean {
    return this.reason !== 'not_renewed' && this.reason !== 'queue_unreachable';
  }

  toJSON() {
    return {
      code: this.code,
      message: this.message,
      jobId: this.jobId,
      during: this.during,
      reason: this.reason,
      expected: this.expected,
      ...(this.current ? { current: this.current } : {}),
    };
  }
}

/** Why a lease was lost, in words: the one table the error message and the demo's timeline share. */
export const LOSS_WORDS: Readonly<Record<LossReason, string>> = {
  not_leased: 'the job is no longer leased',
  cancelled: 'the job was cancelled',
  token_mismatch: 'the job was claimed again under a newer token',
  owner_mismatch: 'another owner holds this token',
  deadline_passed: "the job's deadline has passed",
  lease_expired: 'the lease expired before the queue heard from the worker',
  unknown_job: 'the queue does not know the job',
  fenced: 'the receiver has already seen a newer token for the job',
  not_renewed: "no renewal succeeded before the lease's estimated end",
  queue_unreachable: 'the queue could not be reached before the lease ran out',
};

function lossMessage(d: LeaseLostDetails): string {
  const held = `owner "${d.expected.owner}" token ${d.expected.token}`;
  const now = d.current
    ? ` The job now has status ${d.current.status}, owner ${d.current.owner === null ? 'none' : `"${d.current.owner}"`}, token ${d.current.token}.`
    : '';
  return `Lease on job "${d.jobId}" (${held}) is lost, found during ${d.during}: ${LOSS_WORDS[d.reason]}.${now} Nothing more is done under this token.`;
}
