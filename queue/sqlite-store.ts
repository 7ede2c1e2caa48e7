// The queue on one SQLite file: the embedded default. Several processes may share the file;
// each write is a short BEGIN IMMEDIATE transaction, retried while SQLite reports SQLITE_BUSY,
// and writes that arrive together in one process share a transaction (group commit).
import type { Knex } from 'knex';
import type { Dialect } from './dialect.js';
import { KnexQueueStore } from './knex-store.js';
import { QueueError } from './errors.js';
import { unavailabilityOf, unavailableMessage } from '../platform/database-errors.js';
import { queueMigrations } from './migrations/index.js';
import {
  isBusyError,
  openSqlite,
  retryBusy,
  type SqliteDatabase,
  type SqliteExecutor,
  type SqliteJournal,
} from '../platform/sqlite.js';
import { systemClock, type Clock, type LateFinishPolicy } from './types.js';
import { checkRequiredOptions, type OptionNames } from '../platform/option-names.js';

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

export function sqliteDialect(db: SqliteDatabase, clock: Clock, busyBudgetMs: number): Dialect {
  // One `now` per transaction, read by its first write: after BEGIN IMMEDIATE has the write
  // lock, so time spent waiting for the lock can never make an expired lease look current.
  // Every transaction hands its writes a new executor.
  const nows = new WeakMap<SqliteExecutor, number>();
  const nowIn = (executor: SqliteExecutor): number => {
    let now = nows.get(executor);
    if (now === undefined) nows.set(executor, (now = clock.now()));
    return now;
  };
  return {
    sql: 'sqlite',
    serverClock: false,
    // In WAL, a second connection: a lease check does not wait for the write transaction on the
    // store's connection (a batch of finishes and its fsync) to end. Else the store's own.
    reads: db.reads,
    commitStats: () => db.commitStats(),
    // Writes that arrive while one transaction runs share the next one (group commit).
    write: (_knex, work) => db.write((executor) => work(executor, nowIn(executor))),
    writeStatement: (_knex, work) => db.write((executor) => work(executor, nowIn(executor))),
    now: async () => clock.now(),
    close: () => db.close(),
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
  };
}

const SQLITE_QUEUE_OPTION_NAMES: OptionNames<SqliteQueueOptions> = {
  filename: true,
  clock: true,
  latePolicy: true,
  busyBudgetMs: true,
  busyTimeoutMs: true,
  journal: true,
  commitWindowMs: true,
};

/** Opens (and migrates) a queue store on one SQLite file. */
export async function openSqliteQueueStore(options: SqliteQueueOptions): Promise<KnexQueueStore> {
  checkRequiredOptions('openSqliteQueueStore', options, SQLITE_QUEUE_OPTION_NAMES);
  const busyBudgetMs = options.busyBudgetMs ?? 60_000;
  const db = openSqlite({
    filename: options.filename,
    busyTimeoutMs: options.busyTimeoutMs ?? 5_000,
    busyBudgetMs,
    ...(options.journal ? { journal: options.journal } : {}),
    groupCommit: {
      // Every QueueError a write throws (stale_lease, unknown_job, job_exists...) comes before
      // it changed anything: a refusal answers that write alone and the batch goes on.
      isRefusal: (err) => err instanceof QueueError,
      ...(options.commitWindowMs !== undefined ? { windowMs: options.commitWindowMs } : {}),
    },
  });
  const dialect = sqliteDialect(db, options.clock ?? systemClock, busyBudgetMs);
  return KnexQueueStore.open(db.knex, dialect, options.latePolicy ?? 'reject');
}
