// The queue's SQL, on knex. Every fencing check is one conditional UPDATE whose WHERE clause
// is the precondition and whose returned row is the answer; a refused write is explained by
// reading the row afterwards. Dialects differ only in how a write transaction begins, where
// `now` comes from, how a claim picks its row, whether the quarantine sweep skips locked rows,
// and which driver errors mean the database is unavailable (made `queue_unavailable` here).
import type { Knex } from 'knex';
import {
  QueueError,
  jobFinishedError,
  notDeadError,
  retryDeadlineError,
  staleLeaseError,
  unknownJobError,
} from './errors.js';
import {
  DEFAULT_LEASE_MS,
  InvalidJobError,
  cancelDisposition,
  currentOf,
  failed,
  leaseUntilFor,
  newJob,
  retryRefusal,
  staleReason,
  toLease,
} from './rules.js';
import type { ListQuery, QueueStore } from './store.js';
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
import { rowToJob, rowToSummary, toJsonText } from './rows.js';
import { rowsOf, type Executor, type Row } from '../platform/sql.js';
import { ClaimableSignal } from './claimable.js';
import type { GroupCommitStats } from '../platform/group-commit.js';
import { eraseJobsIn, expireLeaseIn } from './test-mode.js';

export interface Dialect {
  /** Runs `work` in one short write transaction, handing it the queue's `now` read inside it. */
  write<T>(knex: Knex, work: (trx: Executor, now: number) => Promise<T>): Promise<T>;
  /** The queue's clock, read on the executor (the database server's clock on PostgreSQL). */
  now(executor: Executor): Promise<number>;
  /** Runs migrations; dialects serialise concurrent starts their own way. */
  migrate(knex: Knex): Promise<void>;
  /**
   * The store's answer for a driver error meaning the database stayed busy or unreachable
   * after `write`'s retries: a `queue_unavailable` QueueError with the driver's error as its
   * `cause`. Undefined for any other error.
   */
  unavailable(err: unknown): QueueError | undefined;
  /**
   * SQL returning the `seq`s of the next claimable rows, best first; bindings: now, limit, now,
   * limit, limit. Claimable is `pending` with `run_at <= now`, or `leased` with
   * `lease_until <= now` (rule 1). Where `sweepLock` lets the quarantine skip rows, the pick
   * must itself leave out the rows the quarantine would make dead.
   */
  readonly pickSql: string;
  /**
   * Appended to the quarantine sweep's row selection, e.g. `FOR UPDATE SKIP LOCKED` where
   * concurrent claims would otherwise wait on, or deadlock over, each other's rows. Absent
   * where the write transaction already excludes every other writer (SQLite).
   */
  readonly sweepLock?: string;
  /**
   * How this store hears that a job may have become claimable. Default: its own commits only;
   * PostgreSQL also hears other processes' (LISTEN/NOTIFY).
   */
  claimableSignal?(knex: Knex): ClaimableSignal;
  /** A subquery yielding the ids in one bound JSON array of strings, so one SQL text serves any count. */
  readonly idListSql: string;
  /** Transactions and the writes they carried, where writes share transactions (group commit). */
  commitStats?(): GroupCommitStats;
  /** Closes the database; `knex.destroy()` when left out. */
  close?(knex: Knex): Promise<void>;
}

const COLUMNS = `seq, id, qty, payload, status, owner, token, attempts, max_attempts, priority, lease_ms,
  lease_until, deadline, run_at, result, last_error, dead_reason, created_at, updated_at`;

/** The columns of a JobSummary: all but payload, result and last_error. */
const SUMMARY_COLUMNS = `seq, id, qty, status, owner, token, attempts, max_attempts, priority, lease_ms,
  lease_until, deadline, run_at, dead_reason, created_at, updated_at`;

/** What a job's large columns weigh as stored, in bytes: the measure of a listing's byte budget. */
const WEIGHT =
  'COALESCE(octet_length(payload), 0) + COALESCE(octet_length(result), 0) + COALESCE(octet_length(last_error), 0)';

/** How many of the weights, in order, fit in `maxBytes`: one at least, when there is one. */
function pageCut(weights: readonly number[], maxBytes: number): number {
  let total = 0;
  for (let i = 0; i < weights.length; i++) {
    total += weights[i]!;
    if (total > maxBytes) return Math.max(i, 1);
  }
  return weights.length;
}

/** The same guard as rules.staleReason, as SQL: leased, same token and owner, deadline ahead. */
function guard(policy: LateFinishPolicy): string {
  const live = `status = 'leased' AND id = ? AND token = ? AND owner = ? AND (deadline IS NULL OR deadline > ?)`;
  // Rule 9: under `if-unclaimed` an expired lease still counts until someone claims the job,
  // which changes the token; otherwise rule 2 holds: valid only while now < lease_until.
  return policy === 'if-unclaimed' ? live : `${live} AND lease_until > ?`;
}

function guardBindings(policy: LateFinishPolicy, id: string, presented: Presented, now: number): Knex.Value[] {
  const base: Knex.Value[] = [id, presented.token, presented.owner, now];
  return policy === 'if-unclaimed' ? base : [...base, now];
}

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

  /**
   * Every public method but migrate ends here on failure: callers see only QueueErrors for a
   * busy or unreachable database. Applied outside `dialect.write`, so its retries and group
   * commit (which takes QueueErrors for refusals) still see the driver's own errors. Bound
   * once per store, not per call.
   */
  private readonly rethrow = (err: unknown): never => {
    throw this.dialect.unavailable(err) ?? err;
  };

  /** A store on `knex`, migrated; the handle is destroyed when the migration fails. */
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
    return this.write((trx, now) => enqueueIn(trx, input, now))
      .then((result) => {
        if (result.created) this.claimable.notify();
        return result;
      })
      .catch(this.rethrow);
  }

  claim(owner: string, leaseMs: number): Promise<Lease | null> {
    return this.claimMany(owner, leaseMs, 1).then((leases) => leases[0] ?? null);
  }

  claimMany(owner: string, leaseMs: number, max: number): Promise<Lease[]> {
    return this.write((trx, now) => claimManyIn(trx, this.dialect, owner, leaseMs, max, now)).catch(this.rethrow);
  }

  heartbeat(id: string, presented: Presented, leaseMs: number | undefined): Promise<Lease> {
    return this.write(async (trx, now) => {
      const job = await heartbeatIn(trx, this.latePolicy, id, presented, leaseMs, now);
      return toLease(job);
    }).catch(this.rethrow);
  }

  finish(id: string, presented: Presented, result: unknown): Promise<Job> {
    return this.write((trx, now) => finishIn(trx, this.latePolicy, id, presented, result, now)).catch(this.rethrow);
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
      const [next] = await claimManyIn(
        trx,
        this.dialect,
        presented.owner,
        leaseMs ?? job.leaseMs ?? DEFAULT_LEASE_MS,
        1,
        now,
      );
      return { job, next: next ?? null };
    }).catch(this.rethrow);
  }

  fail(id: string, presented: Presented, error: string, retryInMs: number | undefined): Promise<Job> {
    return this.write((trx, now) => failIn(trx, this.latePolicy, id, presented, error, retryInMs, now))
      .then((job) => {
        if (job.status === 'pending') this.claimable.notify();
        return job;
      })
      .catch(this.rethrow);
  }

  release(id: string, presented: Presented): Promise<Job> {
    return this.write((trx, now) => releaseIn(trx, this.latePolicy, id, presented, now))
      .then((job) => {
        this.claimable.notify();
        return job;
      })
      .catch(this.rethrow);
  }

  cancel(id: string, reason: string | undefined): Promise<Job> {
    return this.write((trx, now) => cancelIn(trx, id, reason, now)).catch(this.rethrow);
  }

  retry(id: string, input: RetryInput): Promise<Job> {
    return this.write((trx, now) => retryIn(trx, id, input, now))
      .then((job) => {
        this.claimable.notify();
        return job;
      })
      .catch(this.rethrow);
  }

  /** Test mode only (startQueue's `testMode`): the lease of `id` ends now (test-mode.ts). */
  expireLease(id: string): Promise<Job> {
    return this.write((trx, now) => expireLeaseIn(trx, id, now))
      .then((job) => {
        this.claimable.notify();
        return job;
      })
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

  /** Every write goes through here, so that stores without group commit count theirs too. */
  private write<T>(work: (trx: Executor, now: number) => Promise<T>): Promise<T> {
    this.writes++;
    return this.dialect.write(this.knex, work);
  }

  onClaimable(listener: () => void): () => void {
    return this.claimable.subscribe(listener);
  }

  async verify(id: string, presented: Presented): Promise<Lease> {
    try {
      const now = await this.dialect.now(this.knex);
      const job = await getIn(this.knex, id);
      if (!job) throw unknownJobError(id);
      const reason = staleReason(job, presented, now, this.latePolicy);
      if (reason) throw staleLeaseError(id, reason, presented, currentOf(job));
      return toLease(job);
    } catch (err) {
      return this.rethrow(err);
    }
  }

  /**
   * `verify` for several leases at once, read with one statement at one `now`: each answer is
   * the lease, or the QueueError `verify` would have thrown for it, in the order asked.
   */
  async verifyMany(presented: ReadonlyArray<Presented & { id: string }>): Promise<Array<Lease | QueueError>> {
    try {
      const now = await this.dialect.now(this.knex);
      const ids = [...new Set(presented.map((p) => p.id))];
      const rows = rowsOf(
        await this.knex.raw(`SELECT ${COLUMNS} FROM queue_jobs WHERE id IN (${this.dialect.idListSql})`, [
          JSON.stringify(ids),
        ]),
      );
      const jobs = new Map(rows.map((row) => [String(row.id), rowToJob(row)]));
      return presented.map(({ id, owner, token }) => {
        const job = jobs.get(id);
        if (!job) return unknownJobError(id);
        const reason = staleReason(job, { owner, token }, now, this.latePolicy);
        return reason ? staleLeaseError(id, reason, { owner, token }, currentOf(job)) : toLease(job);
      });
    } catch (err) {
      return this.rethrow(err);
    }
  }

  get(id: string): Promise<Job | null> {
    return getIn(this.knex, id).catch(this.rethrow);
  }

  async list(query: ListQuery): Promise<Job[]> {
    try {
      return (await this.listed(query, query.limit).select(this.knex.raw(COLUMNS))).map(rowToJob);
    } catch (err) {
      return this.rethrow(err);
    }
  }

  async listPage(query: ListQuery & { maxBytes: number }): Promise<JobPage<Job>> {
    try {
      // The weights first, one more than the page, so the page is cut before a payload is read.
      const weights = (await this.listed(query, query.limit + 1).select(
        'seq',
        this.knex.raw(`${WEIGHT} AS weight`),
      )) as Array<{ seq: number | string; weight: number | string }>;
      const taken = pageCut(
        weights.slice(0, query.limit).map((row) => Number(row.weight)),
        query.maxBytes,
      );
      if (taken === 0) return { jobs: [], next: null };
      const last = weights[taken - 1]!.seq;
      const rows = await this.listed(query, taken).select(this.knex.raw(COLUMNS)).where('seq', '<=', last);
      const jobs = rows.map(rowToJob);
      return { jobs, next: taken < weights.length && jobs.length > 0 ? jobs.at(-1)!.id : null };
    } catch (err) {
      return this.rethrow(err);
    }
  }

  async listSummaries(query: ListQuery): Promise<JobPage<JobSummary>> {
    try {
      const rows = await this.listed(query, query.limit + 1).select(this.knex.raw(SUMMARY_COLUMNS));
      const jobs = rows.slice(0, query.limit).map(rowToSummary);
      return { jobs, next: rows.length > query.limit ? jobs.at(-1)!.id : null };
    } catch (err) {
      return this.rethrow(err);
    }
  }

  /** Jobs in order of enqueue, of `status` when given, after the job `after`; up to `limit` rows. */
  private listed(query: ListQuery, limit: number): Knex.QueryBuilder {
    const q = this.knex('queue_jobs').orderBy('seq').limit(limit);
    if (query.status) q.where('status', query.status);
    // Pages follow the order of enqueue; an id that names no job leaves nothing after it.
    if (query.after !== undefined) q.where('seq', '>', this.knex('queue_jobs').select('seq').where('id', query.after));
    return q;
  }

  async stats(): Promise<Stats> {
    let rows: { status: JobStatus; n: number | string }[];
    try {
      rows = await this.knex('queue_jobs').select('status').count({ n: '*' }).groupBy('status');
    } catch (err) {
      return this.rethrow(err);
    }
    const stats: Stats = { pending: 0, leased: 0, done: 0, dead: 0 };
    for (const row of rows) stats[row.status] = Number(row.n);
    return stats;
  }

  async close(): Promise<void> {
    await this.claimable.close();
    await (this.dialect.close ? this.dialect.close(this.knex) : this.knex.destroy());
  }
}

export async function getIn(executor: Executor, id: string): Promise<Job | null> {
  const rows = await executor.raw(`SELECT ${COLUMNS} FROM queue_jobs WHERE id = ?`, [id]);
  const row = rowsOf(rows)[0];
  return row ? rowToJob(row) : null;
}

export async function enqueueIn(trx: Executor, input: NewJob, now: number): Promise<{ job: Job; created: boolean }> {
  let job: Job;
  try {
    job = newJob(input, now);
  } catch (err) {
    if (err instanceof InvalidJobError) throw new QueueError('invalid_request', err.message);
    throw err;
  }
  const inserted = rowsOf(
    await trx.raw(
      `INSERT INTO queue_jobs (id, qty, payload, status, token, attempts, max_attempts, priority, deadline, run_at,
         request, created_at, updated_at)
       VALUES (?, ?, ?, 'pending', 0, 0, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (id) DO NOTHING
       RETURNING ${COLUMNS}`,
      [
        job.id,
        job.qty,
        toJsonText(job.payload),
        job.maxAttempts,
        job.priority,
        job.deadline,
        job.runAt,
        input.request,
        now,
        now,
      ],
    ),
  );
  if (inserted[0]) return { job: rowToJob(inserted[0]), created: true };
  const existing = rowsOf(await trx.raw(`SELECT ${COLUMNS}, request FROM queue_jobs WHERE id = ?`, [job.id]))[0];
  if (!existing) throw new Error(`job ${job.id} conflicted on insert but cannot be read`);
  if (existing.request !== input.request) {
    throw new QueueError(
      'job_exists',
      `A job with id "${job.id}" already exists with a different request. Use a new id, or send exactly the same body to get the existing job.`,
      { id: job.id },
    );
  }
  return { job: rowToJob(existing), created: false };
}

/**
 * Rules 1, 4, 5: first quarantine every live job that may no longer be given a token, then
 * lease the best claimable ones, up to `max`, in the same transaction. Only the chosen rows
 * are written; each gets its own next token. Answered in claim order.
 */
export async function claimManyIn(
  trx: Executor,
  dialect: Pick<Dialect, 'pickSql' | 'sweepLock'>,
  owner: string,
  leaseMs: number,
  max: number,
  now: number,
): Promise<Lease[]> {
  await quarantineOnce(trx, now, dialect.sweepLock);
  const until = leaseUntilFor(now, leaseMs, null);
  const rows = rowsOf(
    await trx.raw(
      `UPDATE queue_jobs
         SET status = 'leased', owner = ?, token = token + 1, attempts = attempts + 1, lease_ms = ?,
             lease_until = CASE WHEN deadline IS NOT NULL AND deadline < ? THEN deadline ELSE ? END,
             updated_at = ?
       WHERE seq IN (${dialect.pickSql})
         AND ((status = 'pending' AND run_at <= ?) OR (status = 'leased' AND lease_until <= ?))
       RETURNING ${COLUMNS}`,
      [owner, leaseMs, until, until, now, now, max, now, max, max, now, now],
    ),
  );
  // RETURNING has no order of its own: put the leases back in the order the pick chose them.
  rows.sort(byClaimOrder);
  return rows.map((row) => toLease(rowToJob(row)));
}

/** The claim's order: higher priority first, then earlier runAt, then order of enqueue. */
function byClaimOrder(a: Row, b: Row): number {
  return (
    Number(b.priority) - Number(a.priority) || Number(a.run_at) - Number(b.run_at) || Number(a.seq) - Number(b.seq)
  );
}

/** One lease for `owner`, or null: `claimManyIn` with `max` 1. */
export async function claimIn(
  trx: Executor,
  dialect: Pick<Dialect, 'pickSql' | 'sweepLock'>,
  owner: string,
  leaseMs: number,
  now: number,
): Promise<Lease | null> {
  return (await claimManyIn(trx, dialect, owner, leaseMs, 1, now))[0] ?? null;
}

/**
 * Transactions whose quarantine sweep has run. Every write in one transaction shares one
 * `now`, and nothing written at `now` becomes due for quarantine at that same `now` (a new
 * lease ends after it, a passed deadline is refused at enqueue and at retry, a release needs
 * the deadline ahead, a fail spending the last attempt is dead already), so one sweep covers every claim a group commit puts in the
 * transaction. Keyed by the transaction's executor, which each transaction gets anew.
 */
const swept = new WeakMap<Executor, number>();

async function quarantineOnce(trx: Executor, now: number, sweepLock: string | undefined): Promise<void> {
  if (swept.get(trx) === now) return;
  await quarantineIn(trx, now, sweepLock);
  swept.set(trx, now);
}

/**
 * Rules 4 and 5, before any token is issued: a live job whose deadline has passed, or whose
 * lease expired with its attempts spent, becomes `dead`.
 */
export async function quarantineIn(trx: Executor, now: number, sweepLock = ''): Promise<void> {
  await trx.raw(
    `UPDATE queue_jobs
       SET status = 'dead', lease_until = NULL, updated_at = ?,
           dead_reason = CASE WHEN deadline IS NOT NULL AND deadline <= ? THEN 'deadline_passed'
                              ELSE 'attempts_exhausted' END
     WHERE seq IN (
       SELECT seq FROM queue_jobs
       WHERE (status IN ('pending', 'leased') AND deadline IS NOT NULL AND deadline <= ?)
          OR (status = 'leased' AND lease_until <= ? AND attempts >= max_attempts)
       ${sweepLock})`,
    [now, now, now, now],
  );
}

export async function heartbeatIn(
  trx: Executor,
  policy: LateFinishPolicy,
  id: string,
  presented: Presented,
  leaseMs: number | undefined,
  now: number,
): Promise<Job> {
  const rows = rowsOf(
    await trx.raw(
      `UPDATE queue_jobs
         SET lease_ms = COALESCE(?, lease_ms),
             lease_until = CASE WHEN deadline IS NOT NULL AND deadline < ? + COALESCE(?, lease_ms) THEN deadline
                                ELSE ? + COALESCE(?, lease_ms) END,
             updated_at = ?
       WHERE ${guard(policy)}
       RETURNING ${COLUMNS}`,
      [leaseMs ?? null, now, leaseMs ?? null, now, leaseMs ?? null, now, ...guardBindings(policy, id, presented, now)],
    ),
  );
  return rows[0] ? rowToJob(rows[0]) : explainRefusal(trx, policy, id, presented, now);
}

export async function finishIn(
  trx: Executor,
  policy: LateFinishPolicy,
  id: string,
  presented: Presented,
  result: unknown,
  now: number,
): Promise<Job> {
  const rows = rowsOf(
    await trx.raw(
      `UPDATE queue_jobs SET status = 'done', result = ?, updated_at = ?
       WHERE ${guard(policy)}
       RETURNING ${COLUMNS}`,
      [toJsonText(result), now, ...guardBindings(policy, id, presented, now)],
    ),
  );
  return rows[0] ? rowToJob(rows[0]) : explainRefusal(trx, policy, id, presented, now);
}

export async function failIn(
  trx: Executor,
  policy: LateFinishPolicy,
  id: string,
  presented: Presented,
  error: string,
  retryInMs: number | undefined,
  now: number,
): Promise<Job> {
  // The row is read only to compute the outcome (backoff grows with attempts); the guarded
  // UPDATE below is what decides, so a change in between cannot slip through.
  const job = await getIn(trx, id);
  if (!job) throw unknownJobError(id);
  const next = failed(job, error, retryInMs, now);
  const rows = rowsOf(
    await trx.raw(
      `UPDATE queue_jobs
         SET status = ?, run_at = ?, lease_until = NULL, last_error = ?, dead_reason = ?, updated_at = ?
       WHERE ${guard(policy)} AND attempts = ?
       RETURNING ${COLUMNS}`,
      [
        next.status,
        next.runAt,
        next.lastError,
        next.deadReason,
        now,
        ...guardBindings(policy, id, presented, now),
        job.attempts,
      ],
    ),
  );
  return rows[0] ? rowToJob(rows[0]) : explainRefusal(trx, policy, id, presented, now);
}

/** Reads the row after a refused write, only to say why: 404 or 409 stale_lease. */
async function explainRefusal(
  executor: Executor,
  policy: LateFinishPolicy,
  id: string,
  presented: Presented,
  now: number,
): Promise<never> {
  const job = await getIn(executor, id);
  if (!job) throw unknownJobError(id);
  const reason = staleReason(job, presented, now, policy) ?? 'lease_expired';
  throw staleLeaseError(id, reason, presented, currentOf(job));
}

/**
 * `release`, fenced exactly like finish: the guard is the WHERE clause. The holder gives the job
 * back claimable now with its attempt returned (rules.released); the token is left alone, so
 * the next claim issues a higher one and the releasing holder stays fenced.
 */
export async function releaseIn(
  trx: Executor,
  policy: LateFinishPolicy,
  id: string,
  presented: Presented,
  now: number,
): Promise<Job> {
  const rows = rowsOf(
    await trx.raw(
      `UPDATE queue_jobs
         SET status = 'pending', owner = NULL, lease_until = NULL, run_at = ?,
             attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END, updated_at = ?
       WHERE ${guard(policy)}
       RETURNING ${COLUMNS}`,
      [now, now, ...guardBindings(policy, id, presented, now)],
    ),
  );
  return rows[0] ? rowToJob(rows[0]) : explainRefusal(trx, policy, id, presented, now);
}

/**
 * How often a refused cancel or retry is tried again when the read that explains it finds the
 * job back in a state the write takes. Only PostgreSQL can see that (READ COMMITTED: another
 * transaction committed between the two statements); SQLite's write lock rules it out.
 */
const LIFECYCLE_TRIES = 3;

/**
 * `cancel`: one conditional UPDATE taking only live jobs (rules.cancelled). The holder of a
 * cancelled lease is fenced by the status alone: every guarded write needs `leased`. A refusal
 * is read to tell the answers apart (rules.cancelDisposition): a dead job, cancelled or not, is
 * answered unchanged; a done one is `job_finished`.
 */
export async function cancelIn(trx: Executor, id: string, reason: string | undefined, now: number): Promise<Job> {
  for (let tries = 0; tries < LIFECYCLE_TRIES; tries++) {
    const rows = rowsOf(
      await trx.raw(
        `UPDATE queue_jobs
           SET status = 'dead', dead_reason = 'cancelled', lease_until = NULL,
               last_error = COALESCE(?, last_error), updated_at = ?
         WHERE id = ? AND status IN ('pending', 'leased')
         RETURNING ${COLUMNS}`,
        [reason ?? null, now, id],
      ),
    );
    if (rows[0]) return rowToJob(rows[0]);
    const job = await getIn(trx, id);
    if (!job) throw unknownJobError(id);
    const disposition = cancelDisposition(job);
    if (disposition === 'finished') throw jobFinishedError(job);
    if (disposition === 'unchanged') return job;
  }
  throw changingJobError(id, 'cancelled');
}

/**
 * `retry`: one conditional UPDATE taking only a dead job whose deadline is ahead
 * (rules.retried). The token is not in the SET list: it is never reset, so every holder from
 * before the job died stays fenced. A refusal is read only to say why (rules.retryRefusal).
 */
export async function retryIn(trx: Executor, id: string, input: RetryInput, now: number): Promise<Job> {
  for (let tries = 0; tries < LIFECYCLE_TRIES; tries++) {
    const rows = rowsOf(
      await trx.raw(
        `UPDATE queue_jobs
           SET status = 'pending', owner = NULL, lease_until = NULL, attempts = 0, dead_reason = NULL,
               max_attempts = COALESCE(?, max_attempts), run_at = ?, updated_at = ?
         WHERE id = ? AND status = 'dead' AND (deadline IS NULL OR deadline > ?)
         RETURNING ${COLUMNS}`,
        [input.maxAttempts ?? null, input.runAt ?? now, now, id, now],
      ),
    );
    if (rows[0]) return rowToJob(rows[0]);
    const job = await getIn(trx, id);
    if (!job) throw unknownJobError(id);
    const refusal = retryRefusal(job, now);
    if (refusal === 'not_dead') throw notDeadError(job);
    if (refusal === 'deadline_passed') throw retryDeadlineError(job, now);
  }
  throw changingJobError(id, 'retried');
}

function changingJobError(id: string, what: string): QueueError {
  return new QueueError(
    'queue_unavailable',
    `Job "${id}" kept changing under concurrent requests while it was being ${what}; retry the request.`,
    { id },
  );
}
