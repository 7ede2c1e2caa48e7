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
    const mode = RUN_METHODS.has(obj.method ?? '') && !obj.returning ? 'run' : 'all';
    return runStatement(connection, obj.sql, obj.bindings ?? [], mode).then(({ rows, context }) => {
      obj.response = rows;
      obj.context = context; // carries `changes` and `lastID` for `run`
      return obj;
    });
  }

  override async destroyRawConnection(connection: SqliteConnection): Promise<void> {
    for (const { statement } of statementCaches.get(connection)?.values() ?? []) statement.finalize();
    statementCaches.delete(connection);
    await new Promise<void>((resolve, reject) => connection.close((err) => (err ? reject(err) : resolve())));
  }
}

const RUN_METHODS = new Set(['insert', 'update', 'counter', 'del']);
/** Distinct statements kept per connection; the stores send a few dozen SQL texts at most. */
const STATEMENT_CACHE_SIZE = 64;

interface CachedStatement {
  statement: SqliteStatement;
  /**
   * Pending until SQLite has compiled the statement, then undefined. node-sqlite3 never calls
   * back a run or all queued on a statement whose preparation failed (a missing table, a
   * syntax error), which would leave the caller waiting forever with the connection held; so
   * the first run waits for the outcome of the preparation, and a failed one is its error.
   */
  prepared: Promise<void> | undefined;
}

const statementCaches = new WeakMap<SqliteConnection, Map<string, CachedStatement>>();

function statementFor(connection: SqliteConnection, sql: string): CachedStatement {
  let cache = statementCaches.get(connection);
  if (!cache) statementCaches.set(connection, (cache = new Map()));
  let entry = cache.get(sql);
  if (entry) {
    cache.delete(sql);
  } else {
    const created = { prepared: undefined } as unknown as CachedStatement;
    created.prepared = new Promise<void>((resolve, reject) => {
      created.statement = connection.prepare(sql, (err) => {
        if (err) return reject(err);
        created.prepared = undefined;
        resolve();
      });
    });
    entry = created;
    if (cache.size >= STATEMENT_CACHE_SIZE) {
      const [oldestSql, oldest] = cache.entries().next().value as [string, CachedStatement];
      cache.delete(oldestSql);
      oldest.statement.finalize();
    }
  }
  cache.set(sql, entry); // most recently used last
  return entry;
}

/** Runs one statement on a connection through its prepared-statement cache. */
function runStatement(
  connection: SqliteConnection,
  sql: string,
  bindings: readonly unknown[],
  mode: 'run' | 'all',
): Promise<{ rows: unknown[] | undefined; context: unknown }> {
  const entry = statementFor(connection, sql);
  const execute = () =>
    new Promise<{ rows: unknown[] | undefined; context: unknown }>((resolve, reject) => {
      const done = function (this: unknown, err: Error | null, rows?: unknown[]) {
        if (err) {
          // A statement that failed (busy, constraint) is not kept.
          forgetStatement(connection, sql, entry);
          reject(err);
          return;
        }
        resolve({ rows, context: this });
      };
      if (mode === 'run') entry.statement.run([...bindings], done);
      else entry.statement.all([...bindings], done);
    });
  if (!entry.prepared) return execute();
  return entry.prepared.then(execute, (err: unknown) => {
    forgetStatement(connection, sql, entry);
    throw err;
  });
}

/** A connection inside a transaction: `raw` runs one statement and resolves with its rows. */
export interface SqliteExecutor {
  raw(sql: string, bindings: readonly unknown[]): Promise<unknown[]>;
}

/**
 * Runs `work` in one `BEGIN IMMEDIATE` transaction on the knex pool's connection, with every
 * statement going straight to the driver's prepared statements: the queue's write path, where
 * knex's query and transaction machinery cost about a tenth of a claim + finish cycle
 * (`npm run bench -- --profile-only`). Commits, or rolls back when `work` or the COMMIT fails
 * (a COMMIT refused as busy leaves the transaction open otherwise).
 */
export async function withImmediateTransaction<T>(
  knex: Knex,
  work: (executor: SqliteExecutor) => Promise<T>,
): Promise<T> {
  const client = knex.client as PoolClient;
  const connection = await client.acquireConnection();
  // Statements are announced as knex's own are, so `knex.on('query')` listeners still see them.
  const run = (sql: string, bindings: readonly unknown[], mode: 'run' | 'all') => {
    client.emit('query', { sql, bindings, method: 'raw' });
    return runStatement(connection, sql, bindings, mode);
  };
  try {
    await run('BEGIN IMMEDIATE', [], 'run');
    let result: T;
    try {
      result = await work({ raw: async (sql, bindings) => (await run(sql, bindings, 'all')).rows ?? [] });
      await run('COMMIT', [], 'run');
    } catch (err) {
      await run('ROLLBACK', [], 'run').catch(() => undefined);
      throw err;
    }
    return result;
  } finally {
    await client.releaseConnection(connection);
  }
}

/** What the write path uses of knex's client: its pool and its query events. */
interface PoolClient {
  acquireConnection(): Promise<SqliteConnection>;
  releaseConnection(connection: SqliteConnection): Promise<void>;
  emit(event: 'query', query: { sql: string; bindings: readonly unknown[]; method: string }): boolean;
}

function forgetStatement(connection: SqliteConnection, sql: string, entry: CachedStatement): void {
  const cache = statementCaches.get(connection);
  // Several runs may fail on one statement (all queued behind a failed preparation): the first
  // takes it out of the cache and finalizes it, once.
  if (cache?.get(sql) !== entry) return;
  cache.delete(sql);
  entry.statement.finalize();
}

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
}

/** Opens a knex handle on one SQLite file with leasehold's pragmas on every connection. */
export function openSqlite(options: SqliteOptions): Knex {
  const busyTimeoutMs = options.busyTimeoutMs ?? 5_000;
  const journalMode = options.journal === 'wal' ? 'WAL' : 'DELETE';
  return knexFactory({
    client: ImmediateSqliteClient as unknown as typeof Knex.Client,
    connection: { filename: options.filename },
    useNullAsDefault: true,
    // As in openPostgres: knex would print pool errors on stdout, the services' "listening on"
    // line's channel; each also rejects the query that needed the connection.
    log: { warn: () => {}, error: () => {}, debug: () => {}, deprecate: () => {} },
    pool: {
      min: 1,
      max: 1,
      afterCreate(conn: SqliteConnection, done: (err: Error | null, conn: unknown) => void) {
        // synchronous = FULL in either journal mode: every acknowledged commit is on disk. The
        // rollback journal (the default) shares the file between processes without a WAL's
        // shared-memory file.
        conn.exec(
          `PRAGMA journal_mode = ${journalMode}; PRAGMA synchronous = FULL; PRAGMA busy_timeout = ${busyTimeoutMs}; PRAGMA foreign_keys = ON;`,
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
