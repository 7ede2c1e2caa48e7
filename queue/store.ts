// The queue's storage port. The HTTP app and the worker-facing API speak only to this
// interface; SQLite (embedded default) and PostgreSQL implement it with the same rules.
import type { QueueError } from './errors.js';
import type {
  Job,
  JobPage,
  JobStatus,
  JobSummary,
  LateFinishPolicy,
  Lease,
  NewJob,
  Presented,
  RetryInput,
  Stats,
} from './types.js';

export interface ListQuery {
  status?: JobStatus | undefined;
  limit: number;
  /** Only jobs enqueued after the job with this id: the last id of the previous page. */
  after?: string | undefined;
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
  /**
   * Leases up to `max` claimable jobs to `owner` in one transaction, each a claim by rule 1,
   * in claim order (priority, then runAt, then order of enqueue); empty when none is claimable.
   */
  claimMany(owner: string, leaseMs: number, max: number): Promise<Lease[]>;
  heartbeat(id: string, presented: Presented, leaseMs: number | undefined): Promise<Lease>;
  finish(id: string, presented: Presented, result: unknown): Promise<Job>;
  /**
   * Finishes like `finish`, then claims the next job for the same owner in the same
   * transaction. A refused finish claims nothing. `leaseMs` undefined: the finished lease's.
   */
  finishAndClaim(
    id: string,
    presented: Presented,
    result: unknown,
    leaseMs: number | undefined,
  ): Promise<{ job: Job; next: Lease | null }>;
  /**
   * Several finishes of `owner` in one write transaction, all judged at one `now` by one
   * conditional write (queue/sql/finish-many.ts): each result is the job as finished, or the
   * QueueError `finish` would have thrown for it, in the order given. With `next`, up to one
   * lease per accepted finish is claimed for `owner` in the same transaction, in claim order,
   * lasting `next.leaseMs` or as long as the first accepted finish's lease did; refused finishes
   * claim nothing. Ids must be distinct (`invalid_request` otherwise, and nothing changes).
   */
  finishMany(
    owner: string,
    items: ReadonlyArray<{ id: string; token: number; result: unknown }>,
    next: { leaseMs: number | undefined } | undefined,
  ): Promise<{ results: Array<Job | QueueError>; next: Lease[] }>;
  fail(id: string, presented: Presented, error: string, retryInMs: number | undefined): Promise<Job>;
  /**
   * Fenced like `finish`: the holder gives the job back, `pending` and claimable now, with the
   * attempt returned (queue/sql/release.ts). The token is kept, so the next claim issues a higher one.
   */
  release(id: string, presented: Presented): Promise<Job>;
  /**
   * A `pending` or `leased` job becomes `dead` with `deadReason: "cancelled"` (queue/sql/cancel.ts);
   * its holder is refused from then on (`not_leased`). A dead job is answered unchanged; a
   * `done` one is `job_finished`.
   */
  cancel(id: string, reason: string | undefined): Promise<Job>;
  /**
   * A `dead` job back to `pending` with a fresh budget of attempts (queue/sql/retry.ts); its token
   * keeps counting up. `not_dead` for any other job, `deadline_passed` past its deadline.
   */
  retry(id: string, input: RetryInput): Promise<Job>;
  /** Read-only check that `presented` is the current lease. */
  verify(id: string, presented: Presented): Promise<Lease>;
  /**
   * `verify` for several leases, their rows (and on PostgreSQL the server's clock) read by one
   * statement, all judged at one `now`: each answer is the lease or the QueueError that `verify`
   * would have thrown for it, in the order asked. Read-only.
   */
  verifyMany(presented: ReadonlyArray<Presented & { id: string }>): Promise<Array<Lease | QueueError>>;
  get(id: string): Promise<Job | null>;
  /** Up to `limit` jobs in order of enqueue, bounded by count alone: for reads inside the service. */
  list(query: ListQuery): Promise<Job[]>;
  /**
   * A page of jobs in order of enqueue, cut before their payloads, results and errors (as stored)
   * pass `maxBytes`, and holding one job at least: what `GET /jobs` answers, so that no answer
   * grows with what the jobs carry. The large columns are weighed before they are read.
   */
  listPage(query: ListQuery & { maxBytes: number }): Promise<JobPage<Job>>;
  /** A page of jobs without payload, result and lastError: bounded by count, whatever they carry. */
  listSummaries(query: ListQuery): Promise<JobPage<JobSummary>>;
  stats(): Promise<Stats>;
  readonly latePolicy: LateFinishPolicy;
  /**
   * Calls `listener` after a commit that may have made a job claimable (an enqueue, a fail
   * back to pending, a release, a retry), in this process — or, on PostgreSQL, in any process on the database.
   * Returns the function that unsubscribes. Long-polling claims wait on it.
   */
  onClaimable(listener: () => void): () => void;
  /** Write transactions and the writes they carried since the store opened. */
  writeStats(): { transactions: number; writes: number };
  close(): Promise<void>;
}
