// The stores' own statements on PostgreSQL, sent straight to `pg` on a connection borrowed from
// knex's pool, as platform/sqlite.ts's `write` does for SQLite. Each statement is a named
// (prepared) statement, parsed and planned once per connection: a claim's custom plan cost more
// server time than running it (EXPLAIN ANALYZE: about 0.7 ms planning against 0.25 ms
// executing), and knex's query machinery more CPU than the driver. The connections run with
// `plan_cache_mode = force_generic_plan` (openPostgres), which only prepared statements heed.
import type { Knex } from 'knex';
import type { Executor, Row } from './sql.js';

/** What this module needs of a `pg` Client, and the mark knex's pool discards a connection by. */
interface PgClient {
  query(config: { text: string; values: unknown[]; name?: string }): Promise<{ rows: Row[] }>;
  __knex__disposed?: unknown;
}

interface KnexPgClient {
  acquireConnection(): Promise<PgClient>;
  releaseConnection(connection: PgClient): Promise<void>;
}

export interface PostgresWrites {
  /** `work` on one pooled connection outside a transaction: each statement is its own. */
  statement<T>(work: (executor: Executor) => Promise<T>): Promise<T>;
  /** `work` between BEGIN and COMMIT on one pooled connection; ROLLBACK when it or COMMIT fails. */
  transaction<T>(work: (executor: Executor) => Promise<T>): Promise<T>;
}

/** Distinct statement texts named at most; beyond them (never, for the stores' constant SQL) unnamed. */
const MAX_NAMED = 500;

interface Prepared {
  text: string;
  name: string | undefined;
}

const prepared = new Map<string, Prepared>();

// `?` outside quoted text becomes `$1`, `$2`...: the positional form `pg` takes.
const PLACEHOLDER = /'(?:[^']|'')*'|"(?:[^"]|"")*"|\?/g;

/** The `pg` form of `sql` and its statement name, the same for every connection of the process. */
function prepare(sql: string): Prepared {
  let found = prepared.get(sql);
  if (!found) {
    let n = 0;
    const text = sql.replace(PLACEHOLDER, (token) => (token === '?' ? `$${++n}` : token));
    found = { text, name: prepared.size < MAX_NAMED ? `leasehold_${prepared.size + 1}` : undefined };
    prepared.set(sql, found);
  }
  return found;
}

function executorOn(connection: PgClient): Executor {
  return {
    raw: (sql, bindings) => {
      const { text, name } = prepare(sql);
      return connection.query(
        name === undefined ? { text, values: [...bindings] } : { name, text, values: [...bindings] },
      );
    },
  };
}

/** Writes on `knex`'s pool (a `pg` one), outside knex's query builder. */
export function postgresWrites(knex: Knex): PostgresWrites {
  const client = knex.client as KnexPgClient;
  const borrow = async <T>(work: (connection: PgClient) => Promise<T>): Promise<T> => {
    const connection = await client.acquireConnection();
    try {
      return await work(connection);
    } finally {
      await client.releaseConnection(connection);
    }
  };
  return {
    statement: (work) => borrow((connection) => work(executorOn(connection))),
    transaction: (work) =>
      borrow(async (connection) => {
        await connection.query({ text: 'BEGIN', values: [] });
        try {
          const result = await work(executorOn(connection));
          await connection.query({ text: 'COMMIT', values: [] });
          return result;
        } catch (err) {
          // A connection that cannot even roll back goes back to the pool marked, and is discarded.
          await connection.query({ text: 'ROLLBACK', values: [] }).catch((rollbackFailure: unknown) => {
            connection.__knex__disposed = rollbackFailure;
          });
          throw err;
        }
      }),
  };
}
