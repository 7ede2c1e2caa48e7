// The one way leasehold opens SQLite, shared by the queue's and the receiver's stores so both
// keep the same durability settings: one connection (sqlite-connection.ts) with the rollback
// journal or WAL, synchronous=FULL and a busy timeout, on the public APIs of `sqlite3` and knex.
// knex runs migrations, schema and reads; in WAL a second connection, that only reads, serves the
// reads that must not wait behind a write transaction (`reads`). Writes go through one group
// committer, so writes that arrive together share one transaction and its one fsync, in one of
// two kinds:
//
// - `write`: the stores' own statements, prepared once and sent straight to the driver inside
//   `BEGIN IMMEDIATE` ... `COMMIT`. knex's query machinery cost about a tenth of a claim + finish
//   cycle (`npm run bench -- --profile-only`).
// - `transaction`: a knex transaction, for work that must write through knex (the receiver's
//   `apply`); the writes of the other kind in the same batch run in it too. The connection knex
//   is lent begins it IMMEDIATE as well.
//
// IMMEDIATE, because a deferred transaction that reads and later writes fails with SQLITE_BUSY at
// once — ignoring the busy timeout — when another process took the write lock in between;
// IMMEDIATE takes the lock up front, waiting for it under the busy timeout, before any work runs,
// so everything a transaction reads, and a clock read inside it, is current when it writes: time
// spent waiting for the lock cannot make a stale write look current. A COMMIT that SQLite refuses
// (busy: a reader kept its lock past the busy timeout) is rolled back before the error is
// reported, on either kind, so the connection never carries an open transaction to its next
// holder; the whole transaction is then retried while busy, within the budget.
import knexFactory, { type Knex } from 'knex';
import { GroupCommitter, type GroupCommitOptions, type GroupCommitStats } from './group-commit.js';
import { retryTransaction } from './retry.js';
import type { Database } from 'sqlite3';
import { SqliteConnection } from './sqlite-connection.js';

/**
 * SQLite's journal: `delete` (the rollback journal, the default) or `wal`. Both run with
 * synchronous=FULL, so an acknowledged commit is on disk either way; WAL syncs once per commit
 * instead of twice and lets readers run beside the writer, but keeps `-wal` and `-shm` files
 * beside the database, which every process sharing it must be able to map (no network file
 * systems).
 */
export type SqliteJournal = 'delete' | 'wal';

export interface SqliteOptions {
  /** File path, or `:memory:` for a private in-memory database. */
  filename: string;
  /** How long one statement waits for a lock before SQLITE_BUSY. */
  busyTimeoutMs?: number;
  /** Default `delete`. */
  journal?: SqliteJournal;
  /** How long one transaction keeps being retried while SQLite reports SQLITE_BUSY (default 60 s). */
  busyBudgetMs?: number;
  /** How `write` groups writes into transactions. */
  groupCommit?: GroupCommitOptions;
}

/** A connection inside a write transaction: `raw` runs one statement and resolves with its rows. */
export interface SqliteExecutor {
  raw(sql: string, bindings: readonly unknown[]): Promise<unknown[]>;
}

export interface SqliteDatabase {
  /** knex on the same connection: migrations, schema, reads, and `on('query')` for every statement. */
  readonly knex: Knex;
  /**
   * knex for reads that need not wait for a write transaction to end. In WAL on a file, a second
   * connection that only reads (`query_only`): WAL lets it run beside the writer, and it sees
   * every transaction committed before the read began, none still open. Else `knex` itself: in
   * the rollback journal a reader's lock would hold up the writer's COMMIT, and `:memory:` has one
   * connection.
   */
  readonly reads: Knex;
  /**
   * Runs `work` in a `BEGIN IMMEDIATE` transaction on prepared statements, possibly together with
   * other writes (group commit). Each transaction hands its writes a new executor.
   */
  write<T>(work: (executor: SqliteExecutor) => Promise<T>): Promise<T>;
  /** Runs `work` in a knex transaction (begun IMMEDIATE), possibly together with other writes. */
  transaction<T>(work: (trx: Knex.Transaction) => Promise<T>): Promise<T>;
  /** Transactions and the writes they carried. */
  commitStats(): GroupCommitStats;
  /**
   * Calls `listener` with every statement as SQLite received it (`BEGIN IMMEDIATE;` for knex's
   * `BEGIN;`), once it has run, with the milliseconds it spent in the driver (profiling).
   */
  onStatement(listener: (sql: string, ms: number) => void): () => void;
  /** Closes knex and then the connection, once whoever holds it is done. */
  close(): Promise<void>;
}

/** What one transaction hands its writes: the executor, and the knex transaction when it is one. */
interface WriteContext {
  executor: SqliteExecutor;
  trx: Knex.Transaction | undefined;
}

/** Opens one SQLite file (or `:memory:`) with leasehold's pragmas. */
export function openSqlite(options: SqliteOptions): SqliteDatabase {
  const busyTimeoutMs = options.busyTimeoutMs ?? 5_000;
  const busyBudgetMs = options.busyBudgetMs ?? 60_000;
  const journalMode = options.journal === 'wal' ? 'WAL' : 'DELETE';
  // synchronous = FULL in either journal mode: every acknowledged commit is on disk. The
  // rollback journal (the default) shares the file between processes without a WAL's
  // shared-memory file.
  const connection = new SqliteConnection({
    filename: options.filename,
    setup: `PRAGMA journal_mode = ${journalMode}; PRAGMA synchronous = FULL; PRAGMA busy_timeout = ${busyTimeoutMs}; PRAGMA foreign_keys = ON;`,
  });
  const knex = knexOn(connection);
  // Opened on first read, by then migrated (and in WAL: the mode is kept in the file).
  const reader =
    journalMode === 'WAL' && options.filename !== ':memory:'
      ? new SqliteConnection({
          filename: options.filename,
          setup: `PRAGMA busy_timeout = ${busyTimeoutMs}; PRAGMA query_only = ON;`,
        })
      : undefined;
  const reads = reader ? knexOn(reader) : knex;

  /** Prepared statements on the held connection, announced as knex's own are to `knex.on('query')`. */
  const executorOn = (db: Database): SqliteExecutor => ({
    raw: (sql, bindings) => {
      knex.emit('query', { sql, bindings, method: 'raw' });
      return connection.run(db, sql, bindings, 'all');
    },
  });

  /** One BEGIN IMMEDIATE transaction, no retry; ROLLBACK when `work` or the COMMIT fails. */
  const immediate = async <T>(work: (context: WriteContext) => Promise<T>): Promise<T> => {
    const db = await connection.take();
    const executor = executorOn(db);
    const control = (sql: string) => {
      knex.emit('query', { sql, bindings: [], method: 'raw' });
      return connection.run(db, sql, [], 'run');
    };
    try {
      await control('BEGIN IMMEDIATE');
      try {
        const result = await work({ executor, trx: undefined });
        await control('COMMIT');
        return result;
      } catch (err) {
        await control('ROLLBACK').catch(() => undefined);
        throw err;
      }
    } finally {
      connection.give();
    }
  };

  /** One knex transaction; statements of the other kind run on the connection knex holds for it. */
  const inKnex = <T>(work: (context: WriteContext) => Promise<T>): Promise<T> =>
    knex.transaction((trx) => work({ executor: executorOn(connection.held()), trx }));

  // One committer for the one connection: every write of the store, of either kind, shares it.
  const committer = new GroupCommitter<WriteContext, 'knex'>(
    (batch, kinds) => retryBusy(() => (kinds.has('knex') ? inKnex(batch) : immediate(batch)), busyBudgetMs),
    options.groupCommit,
  );

  return {
    knex,
    write: (work) => committer.submit(({ executor }) => work(executor)),
    transaction: (work) =>
      committer.submit(({ trx }) => {
        if (!trx) throw new Error('A knex write ran outside a knex transaction.');
        return work(trx);
      }, 'knex'),
    commitStats: () => committer.stats(),
    reads,
    onStatement: (listener) => {
      const offs = [connection, reader].map((one) => one?.onStatement(listener));
      return () => offs.forEach((off) => off?.());
    },
    async close() {
      if (reader) {
        await reads.destroy();
        await reader.close();
      }
      await knex.destroy();
      await connection.close();
    },
  };
}

/** knex over `connection`, lent as its one-connection pool. */
function knexOn(connection: SqliteConnection): Knex {
  return knexFactory({
    client: 'sqlite3',
    connectionPool: connection.asKnexPool(),
    useNullAsDefault: true,
    // As in openPostgres: knex would print warnings on stdout, the services' "listening on"
    // line's channel; each error also rejects the query it belongs to.
    log: { warn: () => {}, error: () => {}, debug: () => {}, deprecate: () => {} },
  });
}

/**
 * True for SQLite's "database is locked" family of errors, which are safe to retry. By the
 * driver's error code only: a message may quote anyone's text (a job id, an apply callback's
 * error), so an answer that merely reads like "database is locked" is never taken for one.
 */
export function isBusyError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED';
}

/**
 * Runs `operation` again while SQLite reports SQLITE_BUSY, until `budgetMs` is spent.
 * Rollback-journal locking is unfair and polls: under contention from other processes a lock
 * request can outlast the busy timeout although nothing is wrong.
 */
export function retryBusy<T>(operation: () => Promise<T>, budgetMs = 60_000): Promise<T> {
  return retryTransaction(operation, isBusyError, budgetMs);
}
