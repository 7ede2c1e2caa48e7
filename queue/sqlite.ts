// The one way leasehold opens SQLite: knex over `sqlite3`, rollback journal, synchronous=FULL,
// a busy timeout, and transactions that really begin with BEGIN IMMEDIATE.
// Shared by the queue's and the receiver's stores so both keep the same durability settings.
import knexFactory, { type Knex } from 'knex';
import { retryTransaction } from './retry.js';
// knex ships its dialects as CommonJS classes without typings for subclassing.
import Client_SQLite3 from 'knex/lib/dialects/sqlite3/index.js';
import Transaction_Sqlite from 'knex/lib/dialects/sqlite3/execution/sqlite-transaction.js';

/**
 * knex's SQLite transaction always sends a deferred `BEGIN`. A deferred transaction that reads
 * and later writes fails with SQLITE_BUSY at once — ignoring the busy timeout — when another
 * process took the write lock in between. `BEGIN IMMEDIATE` takes the write lock up front and
 * waits for it under the busy timeout, so a claim's select and update see one consistent state.
 */
class ImmediateTransaction extends Transaction_Sqlite {
  override begin(conn: unknown) {
    return this.query(conn, 'BEGIN IMMEDIATE;');
  }

  /**
   * A COMMIT refused with SQLITE_BUSY leaves the transaction open on the connection, and knex
   * would hand that connection to the next caller still inside it. Roll back before reporting.
   */
  override commit(conn: unknown, value: unknown) {
    return this.trxClient.query(conn, 'COMMIT;').then(
      (res: unknown) => {
        this._completed = true;
        this._resolver(value);
        return res;
      },
      async (err: unknown) => {
        try {
          await this.trxClient.query(conn, 'ROLLBACK;');
        } catch {
          // Nothing was open: SQLite already rolled back on its own.
        }
        this._completed = true;
        this._rejecter(err);
      },
    );
  }
}

/**
 * Also reuses prepared statements. node-sqlite3 prepares, plans and finalizes a statement on
 * every call; for a claim's UPDATE that was most of its cost (measured with `npm run bench --
 * --profile-only`). Each connection keeps its most recent statements, keyed by SQL text.
 */
class ImmediateSqliteClient extends Client_SQLite3 {
  override transaction(...args: unknown[]) {
    return new ImmediateTransaction(this, ...args);
  }

  override _query(connection: SqliteConnection, obj: QueryObject): Promise<QueryObject> {
    if (!obj.sql) throw new Error('The query is empty');
    // As knex's own sqlite3 client: `run` where the caller needs changes/lastID, `all` otherwise.
    const useRun = RUN_METHODS.has(obj.method ?? '') && !obj.returning;
    return new Promise((resolve, reject) => {
      const statement = statementFor(connection, obj.sql);
      const done = function (this: unknown, err: Error | null, rows?: unknown[]) {
        if (err) {
          // A statement that failed (busy, constraint, a bad prepare) is not kept.
          forgetStatement(connection, obj.sql, statement);
          reject(err);
          return;
        }
        obj.response = rows;
        obj.context = this; // carries `changes` and `lastID` for `run`
        resolve(obj);
      };
      if (useRun) statement.run(obj.bindings ?? [], done);
      else statement.all(obj.bindings ?? [], done);
    });
  }

  override async destroyRawConnection(connection: SqliteConnection): Promise<void> {
    for (const statement of statementCaches.get(connection)?.values() ?? []) statement.finalize();
    statementCaches.delete(connection);
    await new Promise<void>((resolve, reject) => connection.close((err) => (err ? reject(err) : resolve())));
  }
}

const RUN_METHODS = new Set(['insert', 'update', 'counter', 'del']);
/** Distinct statements kept per connection; the stores send a few dozen SQL texts at most. */
const STATEMENT_CACHE_SIZE = 64;
const statementCaches = new WeakMap<SqliteConnection, Map<string, SqliteStatement>>();

function statementFor(connection: SqliteConnection, sql: string): SqliteStatement {
  let cache = statementCaches.get(connection);
  if (!cache) statementCaches.set(connection, (cache = new Map()));
  let statement = cache.get(sql);
  if (statement) {
    cache.delete(sql);
  } else {
    // A prepare error reaches the run/all queued on the statement; this callback only keeps it
    // from surfacing as an unhandled 'error' event.
    statement = connection.prepare(sql, () => undefined);
    if (cache.size >= STATEMENT_CACHE_SIZE) {
      const [oldestSql, oldest] = cache.entries().next().value as [string, SqliteStatement];
      cache.delete(oldestSql);
      oldest.finalize();
    }
  }
  cache.set(sql, statement); // most recently used last
  return statement;
}

function forgetStatement(connection: SqliteConnection, sql: string, statement: SqliteStatement): void {
  const cache = statementCaches.get(connection);
  if (cache?.get(sql) === statement) cache.delete(sql);
  statement.finalize();
}

export interface SqliteOptions {
  /** File path, or `:memory:` for a private in-memory database. */
  filename: string;
  /** How long one statement waits for a lock before SQLITE_BUSY. */
  busyTimeoutMs?: number;
}

/** Opens a knex handle on one SQLite file with leasehold's pragmas on every connection. */
export function openSqlite(options: SqliteOptions): Knex {
  const busyTimeoutMs = options.busyTimeoutMs ?? 5_000;
  return knexFactory({
    client: ImmediateSqliteClient as unknown as typeof Knex.Client,
    connection: { filename: options.filename },
    useNullAsDefault: true,
    pool: {
      min: 1,
      max: 1,
      afterCreate(conn: SqliteConnection, done: (err: Error | null, conn: unknown) => void) {
        // Rollback journal + FULL: every acknowledged commit is on disk and the file can be
        // shared by several processes without a WAL's shared-memory file.
        conn.exec(
          `PRAGMA journal_mode = DELETE; PRAGMA synchronous = FULL; PRAGMA busy_timeout = ${busyTimeoutMs}; PRAGMA foreign_keys = ON;`,
          (err) => done(err, conn),
        );
      },
    },
  });
}

interface SqliteStatement {
  all(params: unknown[], cb: (this: unknown, err: Error | null, rows: unknown[]) => void): void;
  run(params: unknown[], cb: (this: unknown, err: Error | null) => void): void;
  finalize(cb?: () => void): void;
}

interface SqliteConnection {
  exec(sql: string, cb: (err: Error | null) => void): void;
  prepare(sql: string, cb: (err: Error | null) => void): SqliteStatement;
  close(cb: (err: Error | null) => void): void;
}

/** What knex hands a client's `_query`. */
interface QueryObject {
  sql: string;
  bindings?: unknown[];
  method?: string;
  returning?: unknown;
  response?: unknown;
  context?: unknown;
}

/** True for SQLite's "database is locked" family of errors, which are safe to retry. */
export function isBusyError(err: unknown): boolean {
  const e = err as { code?: string; errno?: number; message?: string } | null;
  if (!e) return false;
  if (e.code === 'SQLITE_BUSY' || e.code === 'SQLITE_LOCKED') return true;
  return typeof e.message === 'string' && /SQLITE_BUSY|database is locked/.test(e.message);
}

/**
 * Runs `operation` again while SQLite reports SQLITE_BUSY, until `budgetMs` is spent.
 * Rollback-journal locking is unfair and polls: under contention from other processes a lock
 * request can outlast the busy timeout although nothing is wrong.
 */
export function retryBusy<T>(operation: () => Promise<T>, budgetMs = 60_000): Promise<T> {
  return retryTransaction(operation, isBusyError, budgetMs);
}
