// The queue on one SQLite file: the embedded default. Several processes may share the file;
// each write is a short BEGIN IMMEDIATE transaction, retried while SQLite reports SQLITE_BUSY,
// and writes that arrive together in one process share a transaction (group commit).
import type { Knex } from 'knex';
import { KnexQueueStore, type Dialect } from './knex-store.js';
import { QueueError } from './errors.js';
import { unavailabilityOf, unavailableMessage } from '../platform/database-errors.js';
import { GroupCommitter } from '../platform/group-commit.js';
import { queueMigrations } from './migrations/index.js';
import {
  isBusyError,
  openSqlite,
  retryBusy,
  withImmediateTransaction,
  type SqliteExecutor,
  type SqliteJournal,
} from '../platform/sqlite.js';
import { systemClock, type Clock, type LateFinishPolicy } from './types.js';

export interface SqliteQueueOptions {
  /** Path of the database file, or `:memory:`. */
  filename: string;
  clock?: Clock;
  latePolicy?: LateFinishPolicy;
  /** How long one write keeps retrying SQLITE_BUSY before giving up. */
  busyBudgetMs?: number;
  busyTimeoutMs?: number;
  /** Default `delete` (the rollback journal); `wal` is as durable (synchronous stays FULL). */
  journal?: SqliteJournal;
  /** The group commit's window (default 2 ms; 0 turns it off): see GroupCommitOptions.windowMs. */
  commitWindowMs?: number;
}

export function sqliteDialect(clock: Clock, busyBudgetMs: number, commitWindowMs?: number): Dialect {
  let committer: GroupCommitter<{ executor: SqliteExecutor; now: number }> | undefined;
  return {
    commitStats: () => committer?.stats() ?? { transactions: 0, writes: 0, windows: 0, windowTimeouts: 0 },
    write: (knex, work) => {
      // One SQLite connection per store runs one transaction at a time: writes that arrive
      // meanwhile share the next one (group commit) instead of queueing for a commit each.
      committer ??= new GroupCommitter(
        (batch) =>
          retryBusy(
            // `now` is read after BEGIN IMMEDIATE has the write lock, so time spent waiting for
            // the lock can never make an expired lease look current.
            () => withImmediateTransaction(knex, (executor) => batch({ executor, now: clock.now() })),
            busyBudgetMs,
          ),
        // Every QueueError a write throws (stale_lease, unknown_job, job_exists...) comes
        // before it changed anything. queue_unavailable is never among them: the store makes
        // it from the driver's error only after the committer has given up.
        {
          isRefusal: (err) => err instanceof QueueError,
          ...(commitWindowMs !== undefined ? { windowMs: commitWindowMs } : {}),
        },
      );
      return committer.submit(({ executor, now }) => work(executor, now));
    },
    now: async () => clock.now(),
    migrate: (knex: Knex) => retryBusy(() => knex.migrate.latest(queueMigrations), busyBudgetMs),
    unavailable: (err) => {
      const condition = unavailabilityOf(err);
      if (condition)
        return new QueueError('queue_unavailable', unavailableMessage(condition, 'queue'), {}, { cause: err });
      return isBusyError(err)
        ? new QueueError(
            'queue_unavailable',
            'The database stayed locked by other processes for longer than the retry budget. Retry the request.',
            {},
            { cause: err },
          )
        : undefined;
    },
    // Two index walks, each stopping after `limit` rows, then the best of those: pending jobs
    // by (priority, run_at, seq) and expired leases, so a claim never sorts the queue.
    idListSql: 'SELECT value FROM json_each(?)',
    pickSql: `SELECT seq FROM (
        SELECT * FROM (SELECT seq, priority, run_at FROM queue_jobs
          WHERE status = 'pending' AND run_at <= ? ORDER BY priority DESC, run_at, seq LIMIT ?)
        UNION ALL
        SELECT * FROM (SELECT seq, priority, run_at FROM queue_jobs
          WHERE status = 'leased' AND lease_until <= ? ORDER BY priority DESC, run_at, seq LIMIT ?)
      ) ORDER BY priority DESC, run_at, seq LIMIT ?`,
  };
}

/** Opens (and migrates) a queue store on one SQLite file. */
export async function openSqliteQueueStore(options: SqliteQueueOptions): Promise<KnexQueueStore> {
  const knex = openSqlite({
    filename: options.filename,
    busyTimeoutMs: options.busyTimeoutMs ?? 5_000,
    ...(options.journal ? { journal: options.journal } : {}),
  });
  const dialect = sqliteDialect(options.clock ?? systemClock, options.busyBudgetMs ?? 60_000, options.commitWindowMs);
  return KnexQueueStore.open(knex, dialect, options.latePolicy ?? 'reject');
}
