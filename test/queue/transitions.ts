// The queue's state changes as pure functions, for tests that state what a store write must
// produce: the store computes them in SQL (queue/sql/claim.ts, release.ts, cancel.ts, retry.ts),
// and the suites compare its rows with these.
import { leaseUntilFor } from '../../queue/rules.js';
import type { Job, RetryInput } from '../../queue/types.js';

/** Rule 1: the job after a successful claim. */
export function claimed(job: Job, owner: string, leaseMs: number, now: number): Job {
  return {
    ...job,
    status: 'leased',
    owner,
    token: job.token + 1,
    attempts: job.attempts + 1,
    leaseMs,
    leaseUntil: leaseUntilFor(now, leaseMs, job.deadline),
    updatedAt: now,
  };
}

/**
 * `release`: the holder gives the job back unworked. It is `pending` and claimable at once, the
 * attempt its claim spent is given back, and nobody owns it. The token stays: the next claim
 * issues `token + 1`, so the releasing holder's token stays fenced.
 */
export function released(job: Job, now: number): Job {
  return {
    ...job,
    status: 'pending',
    owner: null,
    leaseUntil: null,
    attempts: Math.max(0, job.attempts - 1),
    runAt: now,
    updatedAt: now,
  };
}

/**
 * `cancel` of a live job: `dead` for good (until a retry), its holder fenced out because the job
 * is no longer `leased`. Owner and token stay as history; `reason`, when given, is `lastError`.
 */
export function cancelled(job: Job, reason: string | undefined, now: number): Job {
  return {
    ...job,
    status: 'dead',
    deadReason: 'cancelled',
    leaseUntil: null,
    lastError: reason ?? job.lastError,
    updatedAt: now,
  };
}

/**
 * `retry` of a dead job: `pending` at `runAt` (default now) with a fresh budget of attempts.
 * `lastError` stays as history, and the token is never reset: the next claim issues
 * `token + 1`, so any holder from before the job died stays fenced, in the queue and at the
 * receiver, which rejects tokens below the highest it has seen.
 */
export function retried(job: Job, input: RetryInput, now: number): Job {
  return {
    ...job,
    status: 'pending',
    owner: null,
    leaseUntil: null,
    attempts: 0,
    maxAttempts: input.maxAttempts ?? job.maxAttempts,
    runAt: input.runAt ?? now,
    deadReason: null,
    updatedAt: now,
  };
}
