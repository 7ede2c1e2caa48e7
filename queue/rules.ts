// Lease rules as pure functions of (job, input, now): no I/O, no clock of their own.
// The store's SQL (queue/sql/) enforces the same rules in its WHERE clauses; these functions
// compute the values it writes and explain, after a refused write, why it was refused.
import type {
  CurrentLease,
  DeadReason,
  Job,
  LateFinishPolicy,
  Lease,
  NewJob,
  Presented,
  StaleReason,
} from './types.js';

export const DEFAULT_LEASE_MS = 30_000;
export const DEFAULT_MAX_ATTEMPTS = 5;
export const BACKOFF_BASE_MS = 1_000;
export const BACKOFF_MAX_MS = 5 * 60_000;

/** Rule 4: a lease never outlives the job's deadline. */
export function leaseUntilFor(now: number, leaseMs: number, deadline: number | null): number {
  const until = now + leaseMs;
  return deadline !== null && deadline < until ? deadline : until;
}

/** Rule 4: the deadline has passed when `now >= deadline`. */
export function deadlinePassed(deadline: number | null, now: number): boolean {
  return deadline !== null && now >= deadline;
}

/** Rule 2: valid only while `now < leaseUntil`; at `leaseUntil` it has ended. */
export function leaseValid(job: Pick<Job, 'status' | 'leaseUntil'>, now: number): boolean {
  return job.status === 'leased' && job.leaseUntil !== null && now < job.leaseUntil;
}

export type ClaimDisposition = { kind: 'claim' } | { kind: 'dead'; reason: DeadReason } | { kind: 'skip' };

/**
 * Rule 1 with rules 4 and 5: what a claim at `now` does with this job. A spent or overdue
 * job is quarantined instead of being given a new token.
 */
export function claimDisposition(job: Job, now: number): ClaimDisposition {
  if (job.status === 'pending' || (job.status === 'leased' && !leaseValid(job, now))) {
    if (deadlinePassed(job.deadline, now)) return { kind: 'dead', reason: 'deadline_passed' };
    if (job.status === 'leased' && job.attempts >= job.maxAttempts) {
      return { kind: 'dead', reason: 'attempts_exhausted' };
    }
    if (job.status === 'pending' && job.runAt > now) return { kind: 'skip' };
    return { kind: 'claim' };
  }
  return { kind: 'skip' };
}

/**
 * Rule 3 (and 9): why `presented` is not the current lease of `job` at `now`, or null when it
 * is. Reasons are checked in the contract's order, so the first that applies is reported.
 */
export function staleReason(
  job: Job,
  presented: Presented,
  now: number,
  policy: LateFinishPolicy = 'reject',
): StaleReason | null {
  if (job.status !== 'leased') return 'not_leased';
  if (job.token !== presented.token) return 'token_mismatch';
  if (job.owner !== presented.owner) return 'owner_mismatch';
  if (deadlinePassed(job.deadline, now)) return 'deadline_passed';
  // Under `if-unclaimed`, an expired lease that nobody has claimed since is still honoured:
  // a claim would have changed the token (or quarantined the job), so a matching token on a
  // leased row proves nobody has.
  if (policy === 'reject' && !leaseValid(job, now)) return 'lease_expired';
  return null;
}

/** A job's backoff before attempt `attempts + 1`: 1 s, 2 s, 4 s... capped at 5 minutes. */
export function defaultRetryInMs(attempts: number): number {
  const exponent = Math.max(0, Math.min(attempts - 1, 20));
  return Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** exponent);
}

/** `fail`: back to `pending` at `runAt`, or `dead` when the last attempt is spent (rule 5). */
export function failed(job: Job, error: string, retryInMs: number | undefined, now: number): Job {
  const base = { ...job, lastError: error, leaseUntil: null, updatedAt: now };
  if (job.attempts >= job.maxAttempts) {
    return { ...base, status: 'dead', deadReason: 'attempts_exhausted' };
  }
  return { ...base, status: 'pending', runAt: now + (retryInMs ?? defaultRetryInMs(job.attempts)) };
}

/**
 * What `cancel` does with a job: a live one (`pending` or `leased`) is cancelled; a dead one is
 * left as it is, so cancelling twice, or cancelling a job that died meanwhile, is harmless; a
 * done one cannot be cancelled, its work having happened.
 */
export type CancelDisposition = 'cancel' | 'unchanged' | 'finished';

export function cancelDisposition(job: Pick<Job, 'status'>): CancelDisposition {
  if (job.status === 'done') return 'finished';
  return job.status === 'dead' ? 'unchanged' : 'cancel';
}

/**
 * Why `retry` refuses `job` at `now`, or null when it may. Only a dead job is retried, and not
 * one past its deadline: rule 4 would quarantine it again before anyone could claim it.
 */
export function retryRefusal(
  job: Pick<Job, 'status' | 'deadline'>,
  now: number,
): 'not_dead' | 'deadline_passed' | null {
  if (job.status !== 'dead') return 'not_dead';
  return deadlinePassed(job.deadline, now) ? 'deadline_passed' : null;
}

export function toLease(job: Job): Lease {
  if (job.status !== 'leased' || job.owner === null || job.leaseUntil === null) {
    throw new Error(`job ${job.id} is not leased`);
  }
  return {
    id: job.id,
    qty: job.qty,
    payload: job.payload,
    owner: job.owner,
    token: job.token,
    attempt: job.attempts,
    leaseUntil: job.leaseUntil,
    deadline: job.deadline,
  };
}

export function currentOf(job: Job): CurrentLease {
  return { status: job.status, owner: job.owner, token: job.token, leaseUntil: job.leaseUntil };
}

export class InvalidJobError extends Error {}

/**
 * A new job at `now`: `deadlineMs` is relative to the queue's clock, `deadline` absolute.
 * Both at once, or a deadline that has already passed, is refused.
 */
export function newJob(input: NewJob, now: number): Job {
  if (input.deadline !== undefined && input.deadlineMs !== undefined) {
    throw new InvalidJobError('Give either "deadline" (epoch ms) or "deadlineMs" (relative), not both.');
  }
  const deadline = input.deadline ?? (input.deadlineMs !== undefined ? now + input.deadlineMs : null);
  if (deadline !== null && deadlinePassed(deadline, now)) {
    throw new InvalidJobError(`The deadline ${deadline} has already passed (the queue's clock reads ${now}).`);
  }
  return {
    id: input.id,
    qty: input.qty,
    payload: input.payload,
    status: 'pending',
    owner: null,
    token: 0,
    attempts: 0,
    maxAttempts: input.maxAttempts,
    priority: input.priority,
    leaseMs: null,
    leaseUntil: null,
    deadline,
    runAt: input.runAt ?? now,
    result: null,
    lastError: null,
    deadReason: null,
    createdAt: now,
    updatedAt: now,
  };
}
