// The queue's storage port. The HTTP app and the worker-facing API speak only to this
// interface; SQLite (embedded default) and PostgreSQL implement it with the same rules.
import type { Job, JobStatus, LateFinishPolicy, Lease, NewJob, Presented, Stats } from './types.js';

export interface ListQuery {
  status?: JobStatus | undefined;
  limit: number;
}

/**
 * Refusals are QueueErrors, and so is a database that stays busy or unreachable past the
 * store's retries (`queue_unavailable`, the driver's error as `cause`); `migrate` alone reports
 * the driver's error itself.
 */
export interface QueueStore {
  /** Creates or upgrades the schema. Safe to run from several processes at once. */
  migrate(): Promise<void>;
  /** Adds a job; the same id with the same request returns the existing job (`created: false`). */
  enqueue(job: NewJob): Promise<{ job: Job; created: boolean }>;
  /** Leases the next claimable job to `owner`, or returns null when none is claimable. */
  claim(owner: string, leaseMs: number): Promise<Lease | null>;
  heartbeat(id: string, presented: Presented, leaseMs: number | undefined): Promise<Lease>;
  finish(id: string, presented: Presented, result: unknown): Promise<Job>;
  fail(id: string, presented: Presented, error: string, retryInMs: number | undefined): Promise<Job>;
  /** Read-only check that `presented` is the current lease. */
  verify(id: string, presented: Presented): Promise<Lease>;
  get(id: string): Promise<Job | null>;
  list(query: ListQuery): Promise<Job[]>;
  stats(): Promise<Stats>;
  readonly latePolicy: LateFinishPolicy;
  close(): Promise<void>;
}
