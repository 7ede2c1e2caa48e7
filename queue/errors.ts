// The queue's one error class. Routes throw it; the app renders it; the client rebuilds it
// from a response, so a caller handles the same `code` whether it embeds or calls over HTTP.
import { isCodeOf, ServiceError, type EdgeFailure } from '../platform/service-error.js';
import type { CurrentLease, Job, Presented, StaleReason } from './types.js';

export const QUEUE_ERROR_STATUS = {
  invalid_request: 400,
  /** With --api-key: the request did not carry `Authorization: Bearer <key>`. */
  unauthorized: 401,
  unknown_job: 404,
  not_found: 404,
  job_exists: 409,
  stale_lease: 409,
  job_finished: 409,
  not_dead: 409,
  deadline_passed: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  internal: 500,
  queue_unavailable: 503,
  /** A long-polling claim beyond the queue's cap on waiting claims. */
  too_many_waiters: 503,
} as const;

export type QueueErrorCode = keyof typeof QUEUE_ERROR_STATUS;

export class QueueError extends ServiceError<QueueErrorCode> {
  override readonly name = 'QueueError';

  /** `options.cause` keeps the underlying error for logs; it is never part of the JSON body. */
  constructor(code: QueueErrorCode, message: string, details: Record<string, unknown> = {}, options?: ErrorOptions) {
    super(code, QUEUE_ERROR_STATUS[code], message, details, options);
  }

  static fromEdge(failure: EdgeFailure): QueueError {
    return new QueueError(failure.code, failure.message, failure.details);
  }
}

export function isQueueErrorCode(code: unknown): code is QueueErrorCode {
  return isCodeOf(QUEUE_ERROR_STATUS, code);
}

/** 409 stale_lease: says both what the caller presented and what the job is now. */
export function staleLeaseError(
  id: string,
  reason: StaleReason,
  expected: Presented,
  current: CurrentLease,
): QueueError {
  // What was presented, and only that: a fail's `error` or a heartbeat's `leaseMs` rides along in
  // the caller's object, and is no part of the lease it claims to hold.
  const presented = { owner: expected.owner, token: expected.token };
  return new QueueError('stale_lease', staleMessage(id, reason, presented, current), {
    reason,
    expected: presented,
    current,
  });
}

function staleMessage(id: string, reason: StaleReason, expected: Presented, current: CurrentLease): string {
  const asked = `owner "${expected.owner}" token ${expected.token}`;
  const now = `status ${current.status}, owner ${current.owner === null ? 'none' : `"${current.owner}"`}, token ${current.token}`;
  const why: Record<StaleReason, string> = {
    not_leased: 'the job is not leased',
    token_mismatch: 'the token is not the current one (the job was claimed again)',
    owner_mismatch: 'the owner does not hold this token',
    deadline_passed: "the job's deadline has passed",
    lease_expired: 'the lease has expired',
  };
  // A repeat of a finish that landed (its answer lost, say): nothing is wrong, and claiming again would be.
  if (current.status === 'done' && current.owner === expected.owner && current.token === expected.token) {
    return `Job "${id}" is already done: you already finished this job with ${asked}. Nothing more to do; do not claim it again.`;
  }
  // Each claim adds 1 to the token, so a token above the current one was never issued: no claim
  // happened that the caller missed; the caller sent a token it was never given.
  if (reason === 'token_mismatch' && expected.token > current.token) {
    return `Lease on job "${id}" is not current: token ${expected.token} was never issued for this job (its latest token is ${current.token}). Presented ${asked}; the job has ${now}. Check the token the caller kept: send the one its claim returned.`;
  }
  return `Lease on job "${id}" is not current: ${why[reason]}. Presented ${asked}; the job has ${now}. ${nextStep(reason, current)}`;
}

/**
 * What the refused caller does next. "Claim again" only where a claim may bring this job or
 * another: a job done, dead or past its deadline will not run again, and a claim would find
 * nothing of it.
 */
function nextStep(reason: StaleReason, current: CurrentLease): string {
  if (reason === 'deadline_passed') return 'Stop working on it; it will not run again.';
  if (current.status === 'done') return 'Stop working on it; it is done, under another lease, and will not run again.';
  if (current.status === 'dead')
    return 'Stop working on it; it is dead (cancelled or quarantined) and will not run again unless an operator retries it.';
  return 'Stop working on it and claim again.';
}

export function unknownJobError(id: string): QueueError {
  return new QueueError('unknown_job', `No job with id "${id}" exists. Check the id, or enqueue the job first.`, {
    id,
  });
}

/** 409 job_finished: a `done` job cannot be cancelled; its result stands. */
export function jobFinishedError(job: Job): QueueError {
  return new QueueError(
    'job_finished',
    `Job "${job.id}" is already done and cannot be cancelled; its result stands. To undo its work, enqueue a new job that does so.`,
    { id: job.id, status: job.status },
  );
}

/** 409 not_dead: only a `dead` job can be retried. */
export function notDeadError(job: Job): QueueError {
  const what =
    job.status === 'done'
      ? 'it is done; enqueue a new job with a new id to run it again'
      : `it is ${job.status} and will run (or is running) anyway; cancel it first if it must start over`;
  return new QueueError('not_dead', `Job "${job.id}" cannot be retried: ${what}.`, { id: job.id, status: job.status });
}

/** 409 deadline_passed: a retried job past its deadline would be quarantined again at once (rule 4). */
export function retryDeadlineError(job: Job, now: number): QueueError {
  return new QueueError(
    'deadline_passed',
    `Job "${job.id}" cannot be retried: its deadline ${job.deadline} has passed (the queue's clock reads ${now}), ` +
      'so it could never be claimed again. Enqueue a new job with a new id and a later deadline instead.',
    { id: job.id, deadline: job.deadline, now },
  );
}
