// The queue's store on knex: the port (store.ts) built from one SQL operation per file
// (queue/sql/) and a dialect (dialect.ts). Every fencing check is one conditional write whose
// WHERE clause is the precondition and whose returned row is the answer; a refused write is
// explained by reading the row afterwards. Every method but migrate ends in the dialect's
// `unavailable` on failure, outside its retries and group commit, so those still see the
// driver's own errors.
import { setTimeout as delay } from 'node:timers/promises';
import type { Knex } from 'knex';
import type { Executor } from '../platform/sql.js';
import { ClaimableSignal } from './claimable.js';
import type { Dialect } from './dialect.js';
import { unknownJobError, type QueueError } from './errors.js';
import { DEFAULT_LEASE_MS, toLease } from './rules.js';
import { cancelIn } from './sql/cancel.js';
import { anyClaimableIn, claimManyIn } from './sql/claim.js';
import { enqueueIn } from './sql/enqueue.js';
import { failIn } from './sql/fail.js';
import { finishIn } from './sql/finish.js';
import { finishManyIn } from './sql/finish-many.js';
import { getIn } from './sql/get.js';
import { heartbeatIn } from './sql/heartbeat.js';
import { countJobs, listJobs, listPage, listSummaries } from './sql/list.js';
import { releaseIn } from './sql/release.js';
import { retryIn } from './sql/retry.js';
import { verifyManyIn } from './sql/verify.js';
import { eraseJobsIn, expireLeaseIn } from './test-mode.js';
import type { ListQuery, QueueStore } from './store.js';
import type {
  Job,
  JobPage,
  JobSummary,
  LateFinishPolicy,
  Lease,
  NewJob,
  Presented,
  RetryInput,
  Stats,
} from './types.js';

export type { Dialect } from './dialect.js';

/** How long a claim that took nothing waits out rows other transactions hold (PostgreSQL), and how often it looks again. */
const HOLDER_WAIT_MS = 200;
const HOLDER_POLL_MS = 5;

export class KnexQueueStore implements QueueStore {
  private readonly claimable: ClaimableSignal;
  private writes = 0;

  constructor(
    readonly knex: Knex,
    private readonly dialect: Dialect,
    readonly latePolicy: LateFinishPolicy = 'reject',
  ) {
    this.claimable = dialect.claimableSignal?.(knex) ?? new ClaimableSignal();
  }

  /** Bound once per store, not per call. */
  private readonly rethrow = (err: unknown): never => {
    throw this.dialect.unavailable(err) ?? err;
  };

  /** A store on `knex`, migrated; the database is closed when the migration fails. */
  static async open(knex: Knex, dialect: Dialect, latePolicy: LateFinishPolicy = 'reject'): Promise<KnexQueueStore> {
    const store = new KnexQueueStore(knex, dialect, latePolicy);
    try {
      await store.migrate();
      await store.claimable.ready();
    } catch (err) {
      await (dialect.close ? dialect.close(knex) : knex.destroy());
      throw err;
    }
    return store;
  }

  /** Reports the driver's own error: whoever starts the store needs its exact cause. */
  migrate(): Promise<void> {
    return this.dialect.migrate(this.knex);
  }

  enqueue(input: NewJob): Promise<{ job: Job; created: boolean }> {
    const channel = this.dialect.notifyChannel;
    return this.write((trx, now) => enqueueIn(trx, input, now, channel))
      .then((result) => this.notifyIf(result.created, result, channel !== undefined))
      .catch(this.rethrow);
  }

  claim(owner: string, leaseMs: number): Promise<Lease | null> {
    return this.claimMany(owner, leaseMs, 1).then((leases) => leases[0] ?? null);
  }

  claimMany(owner: string, leaseMs: number, max: number): Promise<Lease[]> {
    return this.claimPastHolders(() =>
      this.writeStatement((executor, now) => claimManyIn(executor, this.dialect.sql, owner, leaseMs, max, now)),
    ).catch(this.rethrow);
  }

  /**
   * Runs `claim` again while it takes nothing although a row is claimable (PostgreSQL): its pick
   * skips the rows other transactions hold, and a holder's write holds its row for a moment even
   * when it is refused (a zombie's heartbeat, sent as its lease ends). Rule 2 makes the job
   * claimable at that instant, so the claim waits the moment out, for HOLDER_WAIT_MS at most.
   * Two claims racing for one job: the loser finds it leased when it looks again, and answers
   * nothing. SQLite's claims take the write lock and wait for it instead.
   */
  private async claimPastHolders(claim: () => Promise<Lease[]>): Promise<Lease[]> {
    const started = performance.now();
    for (;;) {
      const leases = await claim();
      if (leases.length > 0 || this.dialect.sql !== 'postgres') return leases;
      if (performance.now() - started >= HOLDER_WAIT_MS) return leases;
      // One statement on the claim's clock (the injected one, or the server's).
      if (!(await this.dialect.writeStatement(this.knex, anyClaimableIn))) return leases;
      await delay(HOLDER_POLL_MS);
    }
  }

  heartbeat(id: string, presented: Presented, leaseMs: number | undefined): Promise<Lease> {
    return this.write(
      async (trx, now) => toLease(await heartbeatIn(trx, this.latePolicy, id, presented, leaseMs, now)),
      id,
    ).catch(this.rethrow);
  }

  finish(id: string, presented: Presented, result: unknown): Promise<Job> {
    return this.write((trx, now) => finishIn(trx, this.latePolicy, id, presented, result, now), id).catch(this.rethrow);
  }

  finishAndClaim(
    id: string,
    presented: Presented,
    result: unknown,
    leaseMs: number | undefined,
  ): Promise<{ job: Job; next: Lease | null }> {
    return this.write(async (trx, now) => {
      // The finish is the guarded write; only once it is accepted does the claim run, so a
      // refused finish (it throws) claims nothing and the transaction changes nothing.
      const job = await finishIn(trx, this.latePolicy, id, presented, result, now);
      const lease = leaseMs ?? job.leaseMs ?? DEFAULT_LEASE_MS;
      const [next] = await claimManyIn(trx, this.dialect.sql, presented.owner, lease, 1, now);
      return { job, next: next ?? null };
    }, id).catch(this.rethrow);
  }

  finishMany(
    owner: string,
    items: ReadonlyArray<{ id: string; token: number; result: unknown }>,
    next: { leaseMs: number | undefined } | undefined,
  ): Promise<{ results: Array<Job | QueueError>; next: Lease[] }> {
    if (items.length === 0) return Promise.resolve({ results: [], next: [] });
    return this.write(
      (trx, now) => finishManyIn(trx, this.dialect.sql, this.latePolicy, owner, items, next, now),
      items.map((item) => item.id),
    ).catch(this.rethrow);
  }

  fail(id: string, presented: Presented, error: string, retryInMs: number | undefined): Promise<Job> {
    return this.write((trx, now) => failIn(trx, this.latePolicy, id, presented, error, retryInMs, now), id)
      .then((job) => this.notifyIf(job.status === 'pending', job))
      .catch(this.rethrow);
  }

  release(id: string, presented: Presented): Promise<Job> {
    return this.write((trx, now) => releaseIn(trx, this.latePolicy, id, presented, now), id)
      .then((job) => this.notifyIf(true, job))
      .catch(this.rethrow);
  }

  cancel(id: string, reason: string | undefined): Promise<Job> {
    return this.write((trx, now) => cancelIn(trx, id, reason, now)).catch(this.rethrow);
  }

  retry(id: string, input: RetryInput): Promise<Job> {
    return this.write((trx, now) => retryIn(trx, id, input, now))
      .then((job) => this.notifyIf(true, job))
      .catch(this.rethrow);
  }

  /** Test mode only (startQueue's `testMode`): the lease of `id` ends now (test-mode.ts). */
  expireLease(id: string): Promise<Job> {
    return this.write((trx, now) => expireLeaseIn(trx, id, now))
      .then((job) => this.notifyIf(true, job))
      .catch(this.rethrow);
  }

  /** Test mode only: every job erased (test-mode.ts). */
  eraseJobs(): Promise<void> {
    return this.write((trx) => eraseJobsIn(trx)).catch(this.rethrow);
  }

  /**
   * Write transactions and the writes they carried since the store opened: where writes share
   * transactions (group commit on SQLite) fewer transactions than writes, else one each.
   */
  writeStats(): { transactions: number; writes: number } {
    const stats = this.dialect.commitStats?.();
    return stats
      ? { transactions: stats.transactions, writes: stats.writes }
      : { transactions: this.writes, writes: this.writes };
  }

  onClaimable(listener: () => void): () => void {
    return this.claimable.subscribe(listener);
  }

  async verify(id: string, presented: Presented): Promise<Lease> {
    const [answer] = await this.verifyMany([{ id, ...presented }]);
    if (!answer) throw unknownJobError(id);
    if (answer instanceof Error) throw answer;
    return answer;
  }

  /**
   * `verify` for several leases at once: the rows, and on PostgreSQL the server's clock, read by
   * one statement (sql/verify.ts), on the dialect's `reads` where it has one (SQLite in WAL: not
   * behind an open write transaction); each answer is the lease, or the QueueError `verify` would
   * have thrown for it, in the order asked.
   */
  verifyMany(presented: ReadonlyArray<Presented & { id: string }>): Promise<Array<Lease | QueueError>> {
    const { dialect } = this;
    const knex = dialect.reads ?? this.knex;
    return verifyManyIn(
      knex,
      dialect.sql,
      dialect.serverClock,
      () => dialect.now(knex),
      this.latePolicy,
      presented,
    ).catch(this.rethrow);
  }

  get(id: string): Promise<Job | null> {
    return getIn(this.knex, id).catch(this.rethrow);
  }

  list(query: ListQuery): Promise<Job[]> {
    return listJobs(this.knex, query).catch(this.rethrow);
  }

  listPage(query: ListQuery & { maxBytes: number }): Promise<JobPage<Job>> {
    return listPage(this.knex, query).catch(this.rethrow);
  }

  listSummaries(query: ListQuery): Promise<JobPage<JobSummary>> {
    return listSummaries(this.knex, query).catch(this.rethrow);
  }

  stats(): Promise<Stats> {
    return countJobs(this.knex).catch(this.rethrow);
  }

  async close(): Promise<void> {
    await this.claimable.close();
    await (this.dialect.close ? this.dialect.close(this.knex) : this.knex.destroy());
  }

  /** Every write goes through here, so that stores without group commit count theirs too. */
  private write<T>(work: (trx: Executor, now: number) => Promise<T>, lock?: string | readonly string[]): Promise<T> {
    this.writes++;
    return this.dialect.write(this.knex, work, lock);
  }

  /** A write of one statement (a claim): see Dialect.writeStatement. */
  private writeStatement<T>(work: (executor: Executor, now: number | null) => Promise<T>): Promise<T> {
    this.writes++;
    return this.dialect.writeStatement(this.knex, work);
  }

  /**
   * Wakes long-polling claims after a commit that may have made a job claimable; `notified`
   * when the commit itself NOTIFYed the other processes.
   */
  private notifyIf<T>(claimable: boolean, value: T, notified = false): T {
    if (claimable) this.claimable.notify(notified);
    return value;
  }
}
