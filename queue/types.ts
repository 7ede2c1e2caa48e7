// The queue's vocabulary, shared by the rules, the store, the HTTP app and the client.

export type JobStatus = 'pending' | 'leased' | 'done' | 'dead';

/** Why a job is `dead`: quarantined by rule 4 or 5, or cancelled by an operator. */
export type DeadReason = 'attempts_exhausted' | 'deadline_passed' | 'cancelled';

/** Why a presented lease is not current, in the order the contract checks them. */
export type StaleReason = 'not_leased' | 'token_mismatch' | 'owner_mismatch' | 'deadline_passed' | 'lease_expired';

export type LateFinishPolicy = 'reject' | 'if-unclaimed';

/**
 * A job without what may be large (payload, result, lastError): what the live page and the
 * audit read, so that a listing of them costs the same whatever the jobs carry.
 */
export type JobSummary = Omit<Job, 'payload' | 'result' | 'lastError'>;

/** One page of a listing, and the `after` of the page that follows (null when this is the last). */
export interface JobPage<T> {
  jobs: T[];
  next: string | null;
}

export interface Job {
  id: string;
  qty: number;
  payload: unknown;
  status: JobStatus;
  owner: string | null;
  token: number;
  attempts: number;
  maxAttempts: number;
  priority: number;
  leaseMs: number | null;
  leaseUntil: number | null;
  deadline: number | null;
  runAt: number;
  result: unknown;
  lastError: string | null;
  deadReason: DeadReason | null;
  createdAt: number;
  updatedAt: number;
}

export interface Lease {
  id: string;
  qty: number;
  payload: unknown;
  owner: string;
  token: number;
  attempt: number;
  leaseUntil: number;
  deadline: number | null;
}

/** What a caller presents to prove it holds a job. */
export interface Presented {
  owner: string;
  token: number;
}

/** The job's side of a refusal: what is, next to what was asked. */
export interface CurrentLease {
  status: JobStatus;
  owner: string | null;
  token: number;
  leaseUntil: number | null;
}

/** A validated enqueue request; times still as sent (the store resolves them on its clock). */
export interface NewJob {
  id: string;
  qty: number;
  payload: unknown;
  maxAttempts: number;
  priority: number;
  runAt: number | undefined;
  deadline: number | undefined;
  deadlineMs: number | undefined;
  /** The request as sent, kept to recognise a repeated enqueue of the same job. */
  request: string;
}

/** A validated retry request: a dead job back to `pending`, optionally later or with a new budget. */
export interface RetryInput {
  /** Replaces the job's `maxAttempts`; unchanged when left out. */
  maxAttempts?: number | undefined;
  /** When the job becomes claimable (epoch ms); the queue's `now` when left out. */
  runAt?: number | undefined;
}

export interface Stats {
  pending: number;
  leased: number;
  done: number;
  dead: number;
}

export { systemClock, type Clock } from '../platform/clock.js';
