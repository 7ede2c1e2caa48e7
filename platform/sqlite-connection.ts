// One SQLite connection, owned here and lent out one holder at a time: to knex (as the pool it is
// given through its public `connectionPool` option) and to the write path, which runs prepared
// statements on it directly. Taking turns on one connection is what lets a `:memory:` database
// work, and keeps knex's reads from running inside a write transaction.
//
// knex is lent not the driver's Database but a connection of the same shape (`run` and `all`,
// the two methods of sqlite3's public API that knex's SQLite dialect calls), which sends every
// statement through the prepared-statement cache and keeps two promises about transactions:
// - a transaction begins IMMEDIATE: knex sends `BEGIN;`, which SQLite would begin deferred, and a
//   deferred transaction that reads and later writes fails with SQLITE_BUSY at once, ignoring the
//   busy timeout, when another process took the write lock in between;
// - a COMMIT that SQLite refuses (busy: a reader kept its lock past the busy timeout) leaves the
//   transaction open, so it is rolled back before the error is reported and the connection is
//   handed on.
import sqlite3 from 'sqlite3';

export interface ConnectionSettings {
  filename: string;
  /** Run once on the new connection, before anything else (leasehold's pragmas). */
  setup: string;
}

/** A statement and, until SQLite has compiled it, the outcome of its preparation. */
interface CachedStatement {
  statement: sqlite3.Statement;
  /**
   * Pending until SQLite has compiled the statement, then undefined. node-sqlite3 never calls
   * back a run or all queued on a statement whose preparation failed (a missing table, a syntax
   * error), which would leave the caller waiting forever with the connection held; so the first
   * run waits for the outcome of the preparation, and a failed one is its error.
   */
  prepared: Promise<void> | undefined;
}

/** Distinct statements kept; the stores send a few dozen SQL texts at most. */
const STATEMENT_CACHE_SIZE = 64;

export class SqliteConnection {
  private opened: Promise<sqlite3.Database> | undefined;
  private taken = false;
  /** The driver's connection once open. */
  private current: sqlite3.Database | undefined;
  private closed = false;
  private readonly waiting: Array<() => void> = [];
  /** Most recently used last. */
  private readonly statements = new Map<string, CachedStatement>();
  private readonly listeners = new Set<(sql: string, ms: number) => void>();

  constructor(private readonly settings: ConnectionSettings) {}

  /**
   * Calls `listener` with every statement as SQLite received it, from knex or the write path, once
   * it has run, with the milliseconds it spent in the driver.
   */
  onStatement(listener: (sql: string, ms: number) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Waits for the connection, opening it on first use; `give` hands it back. */
  async take(): Promise<sqlite3.Database> {
    if (this.closed) throw new Error('The SQLite database is closed.');
    if (this.taken) await new Promise<void>((resolve) => this.waiting.push(resolve));
    else this.taken = true;
    try {
      if (this.closed) throw new Error('The SQLite database is closed.');
      return await this.open();
    } catch (err) {
      this.handOn();
      throw err;
    }
  }

  /** The open connection, for statements sent on behalf of its current holder (knex, in a transaction). */
  held(): sqlite3.Database {
    if (!this.taken || !this.current) throw new Error('The SQLite connection is not held.');
    return this.current;
  }

  /** Hands the connection to the next holder. */
  give(): void {
    this.handOn();
  }

  /**
   * Runs one statement on the held connection through its prepared-statement cache: `all`
   * answers rows, `run` nothing. node-sqlite3 prepares, plans and finalizes a statement on every
   * plain call; for a claim's UPDATE that was most of its cost (`npm run bench -- --profile-only`).
   */
  async run(db: sqlite3.Database, sql: string, bindings: readonly unknown[], mode: 'run' | 'all'): Promise<unknown[]> {
    return (await this.execute(db, sql, bindings, mode)).rows;
  }

  /** `run`, also answering the statement's `changes` and `lastID` (what knex reads after an insert). */
  private async execute(
    db: sqlite3.Database,
    sql: string,
    bindings: readonly unknown[],
    mode: 'run' | 'all',
  ): Promise<{ rows: unknown[]; context: unknown }> {
    const entry = this.statementFor(db, sql);
    if (entry.prepared) {
      try {
        await entry.prepared;
      } catch (err) {
        this.forget(sql, entry);
        throw err;
      }
    }
    const listeners = this.listeners;
    const started = performance.now();
    return new Promise((resolve, reject) => {
      const forget = () => this.forget(sql, entry);
      function done(this: unknown, err: Error | null, rows?: unknown[]) {
        const ms = performance.now() - started;
        for (const listener of listeners) listener(sql, ms);
        if (err) {
          // A statement that failed (busy, constraint) is not kept.
          forget();
          reject(err);
        } else resolve({ rows: rows ?? [], context: this });
      }
      if (mode === 'run') entry.statement.run([...bindings], done);
      else entry.statement.all([...bindings], done);
    });
  }

  /** The connection knex is lent: sqlite3's `run` and `all`, through the cache, IMMEDIATE. */
  private forKnex(db: sqlite3.Database) {
    type Callback = (this: unknown, err: Error | null, rows?: unknown) => void;
    const send = (mode: 'run' | 'all', sql: string, bindings: readonly unknown[] | undefined, callback: Callback) => {
      const text = /^\s*BEGIN\s*;?\s*$/i.test(sql) ? 'BEGIN IMMEDIATE;' : sql;
      this.execute(db, text, bindings ?? [], mode).then(
        ({ rows, context }) => callback.call(context, null, mode === 'all' ? rows : undefined),
        async (err: Error) => {
          if (/^\s*COMMIT\b/i.test(sql)) await this.execute(db, 'ROLLBACK;', [], 'run').catch(() => undefined);
          callback.call(undefined, err);
        },
      );
    };
    return {
      run: (sql: string, bindings: readonly unknown[] | undefined, callback: Callback) =>
        send('run', sql, bindings, callback),
      all: (sql: string, bindings: readonly unknown[] | undefined, callback: Callback) =>
        send('all', sql, bindings, callback),
    };
  }

  /** Waits for the current holder, then finalizes the statements and closes the connection. */
  async close(): Promise<void> {
    if (this.closed) return;
    if (this.taken) await new Promise<void>((resolve) => this.waiting.push(resolve));
    this.taken = true;
    this.closed = true;
    for (const waiter of this.waiting.splice(0)) waiter();
    const opened = this.opened;
    this.opened = undefined;
    this.current = undefined;
    const db = await opened?.catch(() => undefined);
    if (!db) return;
    for (const { statement } of this.statements.values()) statement.finalize();
    this.statements.clear();
    await new Promise<void>((resolve, reject) => db.close((err) => (err ? reject(err) : resolve())));
  }

  /** The shape knex's `connectionPool` option takes (a tarn-compatible pool of this one connection). */
  asKnexPool() {
    let lent: ReturnType<SqliteConnection['forKnex']> | undefined;
    let lentFor: sqlite3.Database | undefined;
    const take = async () => {
      const db = await this.take();
      if (lentFor !== db) [lent, lentFor] = [this.forKnex(db), db];
      return lent;
    };
    return {
      acquire: () => ({ promise: take() }),
      release: () => {
        this.give();
        return true;
      },
      // knex leaves an external pool to its owner: close() closes the connection.
      destroy: async () => undefined,
      numFree: () => (this.taken ? 0 : 1),
      numUsed: () => (this.taken ? 1 : 0),
      numPendingAcquires: () => this.waiting.length,
    };
  }

  private handOn(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.taken = false;
  }

  private open(): Promise<sqlite3.Database> {
    this.opened ??= new Promise<sqlite3.Database>((resolve, reject) => {
      const db = new sqlite3.Database(this.settings.filename, (err) => {
        if (err) return reject(err);
        db.exec(this.settings.setup, (setupErr) => {
          if (!setupErr) {
            this.current = db;
            return resolve(db);
          }
          db.close(() => reject(setupErr));
        });
      });
    }).catch((err: unknown) => {
      // The next holder tries again: the file may be creatable or writable by then.
      this.opened = undefined;
      throw err;
    });
    return this.opened;
  }

  private statementFor(db: sqlite3.Database, sql: string): CachedStatement {
    let entry = this.statements.get(sql);
    if (entry) {
      this.statements.delete(sql);
    } else {
      const created = { prepared: undefined } as unknown as CachedStatement;
      created.prepared = new Promise<void>((resolve, reject) => {
        created.statement = db.prepare(sql, (err: Error | null) => {
          if (err) return reject(err);
          created.prepared = undefined;
          resolve();
        });
      });
      // Observed by run(); a preparation nobody waits on must not be an unhandled rejection.
      created.prepared.catch(() => undefined);
      entry = created;
      if (this.statements.size >= STATEMENT_CACHE_SIZE) {
        const [oldestSql, oldest] = this.statements.entries().next().value as [string, CachedStatement];
        this.statements.delete(oldestSql);
        oldest.statement.finalize();
      }
    }
    this.statements.set(sql, entry);
    return entry;
  }

  private forget(sql: string, entry: CachedStatement): void {
    // Several runs may fail on one statement (all queued behind a failed preparation): the
    // first takes it out of the cache and finalizes it, once.
    if (this.statements.get(sql) !== entry) return;
    this.statements.delete(sql);
    entry.statement.finalize();
  }
}
