// Prototype: the queue's knex client (queue/sqlite.ts, same BEGIN IMMEDIATE transactions and
// pragmas) with a per-connection cache of prepared statements. node-sqlite3 prepares, plans
// and finalizes a statement on every call; for the claim's UPDATE that is most of its cost.
import knexFactory, { type Knex } from 'knex';
import { openSqlite } from '../sqlite.js';

interface Statement {
  all(params: unknown[], cb: (this: unknown, err: Error | null, rows: unknown[]) => void): void;
  run(params: unknown[], cb: (this: unknown, err: Error | null) => void): void;
  finalize(cb?: () => void): void;
}

interface Connection {
  prepare(sql: string, cb: (err: Error | null) => void): Statement;
  close(cb: (err: Error | null) => void): void;
}

interface QueryObject {
  sql: string;
  bindings?: unknown[];
  method?: string;
  returning?: unknown;
  response?: unknown;
  context?: unknown;
}

/** Statements kept per connection; the queue sends a handful of distinct SQL texts. */
const CACHE_SIZE = 64;
const caches = new WeakMap<Connection, Map<string, Statement>>();

function statementFor(connection: Connection, sql: string): Statement {
  let cache = caches.get(connection);
  if (!cache) caches.set(connection, (cache = new Map()));
  let statement = cache.get(sql);
  if (statement) {
    cache.delete(sql);
  } else {
    // A preparation error reaches the call that uses the statement; the callback only keeps
    // it from being emitted as an unhandled 'error' event.
    statement = connection.prepare(sql, () => undefined);
    if (cache.size >= CACHE_SIZE) {
      const [oldest, old] = cache.entries().next().value as [string, Statement];
      cache.delete(oldest);
      old.finalize();
    }
  }
  cache.set(sql, statement); // most recently used last
  return statement;
}

/**
 * Opens a knex handle like openSqlite, whose client reuses prepared statements. `observe`, if
 * given, hears each statement's time inside the driver.
 */
export function openSqliteWithStatementCache(filename: string, observe?: (sql: string, ms: number) => void): Knex {
  const template = openSqlite({ filename });
  const Base = template.client.constructor as new (config: Knex.Config) => Knex.Client;
  const config = template.client.config as Knex.Config;
  void template.destroy();

  class StatementCacheClient extends Base {
    _query(connection: Connection, obj: QueryObject): Promise<QueryObject> {
      if (!obj.sql) throw new Error('The query is empty');
      // As knex's sqlite3 client: `run` where the caller needs changes/lastID, `all` otherwise.
      const useRun = ['insert', 'update', 'counter', 'del'].includes(obj.method ?? '') && !obj.returning;
      return new Promise((resolve, reject) => {
        const started = performance.now();
        const statement = statementFor(connection, obj.sql);
        const done = function (this: unknown, err: Error | null, rows?: unknown[]) {
          observe?.(obj.sql, performance.now() - started);
          if (err) {
            caches.get(connection)?.delete(obj.sql);
            statement.finalize();
            return reject(err);
          }
          obj.response = rows;
          obj.context = this;
          resolve(obj);
        };
        if (useRun) statement.run(obj.bindings ?? [], done);
        else statement.all(obj.bindings ?? [], done);
      });
    }

    override async destroyRawConnection(connection: Connection): Promise<void> {
      for (const statement of caches.get(connection)?.values() ?? []) statement.finalize();
      caches.delete(connection);
      await new Promise<void>((resolve, reject) => connection.close((err) => (err ? reject(err) : resolve())));
    }
  }
  return knexFactory({ ...config, client: StatementCacheClient as unknown as typeof Knex.Client });
}
