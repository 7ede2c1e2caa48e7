// The one way leasehold opens PostgreSQL: knex over `pg`, an optional schema of its own (taken
// from `?schema=NAME` in the URL), migrations serialised across processes by an advisory lock,
// and whole-transaction retries on serialization failures and deadlocks.
// Shared by the queue's and the receiver's stores, as platform/sqlite.ts is for SQLite.
import { describeValue } from './describe-value.js';
import { retryTransaction } from './retry.js';
import knexFactory, { type Knex } from 'knex';

export interface PostgresTarget {
  /** A `postgres://` or `postgresql://` URL, without leasehold's `schema` parameter. */
  connectionString: string;
  /** The schema every table lives in; the server's search_path (usually `public`) when absent. */
  schema: string | undefined;
}

const POSTGRES_URL = /^postgres(?:ql)?:\/\//i;
const ANY_URL = /^[a-z][a-z0-9+.-]*:\/\//i;
/** An unquoted PostgreSQL identifier, so the name needs no escaping anywhere. */
const SCHEMA_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;
const PLAIN_IDENTIFIER = 'use letters, digits and underscores (at most 63, not starting with a digit)';

/** True for a `postgres://` or `postgresql://` URL: the `--db` values that select PostgreSQL. */
export function isPostgresUrl(db: string): boolean {
  return POSTGRES_URL.test(db);
}

/**
 * `db` when it names a database the services can open, by its form only: a SQLite file's path,
 * `:memory:` or a `postgres://` URL; a value of another kind, or empty, is a TypeError.
 */
export function checkDbOption(db: unknown): string {
  if (typeof db !== 'string' || db === '') {
    throw new TypeError(`db must be ":memory:", a SQLite file's path or a postgres:// URL, not ${describeValue(db)}.`);
  }
  return db;
}

/** True for any `scheme://...` value, so a URL of an unsupported database is not taken for a file name. */
export function looksLikeUrl(db: string): boolean {
  return ANY_URL.test(db);
}

/**
 * Splits leasehold's `?schema=NAME` off a PostgreSQL URL; the rest goes to `pg` unchanged. A URL
 * that cannot be read, or that gives the schema more than once, is a RangeError whose message
 * follows the value's name ("db is not ...").
 */
export function parsePostgresUrl(db: string): PostgresTarget {
  if (!isPostgresUrl(db)) throw new Error(`Expected a postgres:// or postgresql:// URL, got "${redactDb(db)}".`);
  let url: URL;
  try {
    url = new URL(db);
  } catch {
    throw new RangeError(
      `"${redactDb(db)}" is not a URL that can be read: write it as postgres://USER:PASSWORD@HOST:PORT/DATABASE, with a port up to 65535 and any of @ : / ? # % or a space in the user or password percent-encoded (@ as %40).`,
    );
  }
  const schemas = url.searchParams.getAll('schema');
  if (schemas.length > 1) {
    throw new RangeError(
      `"${redactDb(db)}" gives ?schema= ${schemas.length} times (${schemas.map((s) => JSON.stringify(s)).join(', ')}); give it once.`,
    );
  }
  const schema = schemas[0];
  if (schema !== undefined && !SCHEMA_NAME.test(schema)) {
    throw new RangeError(
      `"${redactDb(db)}" gives the schema name ${JSON.stringify(schema)}, which is not a plain identifier; ${PLAIN_IDENTIFIER}.`,
    );
  }
  url.searchParams.delete('schema');
  return { connectionString: url.toString(), schema };
}

/** Accepts only plain identifiers as schema names, so they are safe to put in SQL unescaped. */
export function checkSchemaName(schema: string | undefined): string | undefined {
  if (schema !== undefined && !SCHEMA_NAME.test(schema)) {
    throw new Error(`The schema name "${schema}" is not a plain identifier; ${PLAIN_IDENTIFIER}.`);
  }
  return schema;
}

/** Query parameters `pg` reads as secrets: `?password=` stands in for the URL's own `user:pass@`. */
const SECRET_PARAMS = /^(password|sslpassword)$/i;

/**
 * The database value with every secret masked, for logs, printed lines and error messages: the
 * password of `user:pass@` and the `password` (and `sslpassword`) query parameters of a URL. A
 * file name comes back as it is.
 */
export function redactDb(db: string): string {
  if (!looksLikeUrl(db)) return db;
  try {
    const url = new URL(db);
    if (url.password) url.password = '***';
    for (const name of [...url.searchParams.keys()]) {
      if (SECRET_PARAMS.test(name)) url.searchParams.set(name, '***');
    }
    return url.toString();
  } catch {
    // Not a URL the WHATWG parser takes: mask what could be a secret by shape instead.
    // Up to the last @: a password that breaks the URL may hold an @, a ? or a # of its own.
    return db.replace(/\/\/.*@/, '//***@').replace(/([?&](?:ssl)?password=)[^&#]*/gi, '$1***');
  }
}

export interface OpenPostgresOptions extends PostgresTarget {
  /** Connections in the pool; migrations need at least two. */
  poolMax?: number;
}

/** Opens a knex pool on PostgreSQL whose connections all use `schema` (when given). */
export function openPostgres(options: OpenPostgresOptions): Knex {
  return knexFactory({
    client: 'pg',
    connection: { connectionString: options.connectionString },
    ...(options.schema ? { searchPath: [options.schema] } : {}),
    pool: {
      min: 0,
      max: Math.max(2, options.poolMax ?? 10),
      // Prepared statements (postgres-writes.ts) keep one plan per connection instead of being
      // planned again on each run; statements sent through knex are unnamed, planned per run
      // with their values, and this setting does not touch them.
      afterCreate: (connection: { query(sql: string): Promise<unknown> }, done: (err: unknown) => void) => {
        connection.query('SET plan_cache_mode = force_generic_plan').then(
          () => done(null),
          (err: unknown) => done(err),
        );
      },
    },
    // knex prints pool errors with console.log, i.e. on stdout, which carries the services' one
    // "listening on" line. Every such error also rejects the query that needed the connection,
    // and reaches the service's own logger from there.
    log: { warn: () => {}, error: () => {}, debug: () => {}, deprecate: () => {} },
  });
}

/**
 * Runs `migrate` while holding a transaction-scoped advisory lock named after the schema, so
 * processes starting together migrate one after another: knex's own lock table is itself
 * created with check-then-create, which races, and so does CREATE SCHEMA IF NOT EXISTS.
 * The schema is created outside the lock's transaction (on another pooled connection) so the
 * migrator's connections see it at once.
 */
export async function migrateSerialised(
  knex: Knex,
  schema: string | undefined,
  migrate: () => Promise<unknown>,
): Promise<void> {
  await knex.transaction(async (trx) => {
    await trx.raw('SELECT pg_advisory_xact_lock(hashtextextended(?, 0))', [
      `leasehold migrate ${schema ?? '(search_path)'}`,
    ]);
    if (schema) {
      // Checked first: CREATE SCHEMA needs the CREATE privilege even when the schema exists.
      const existing = await knex.raw('SELECT 1 FROM pg_namespace WHERE nspname = ?', [schema]);
      if ((existing as { rowCount: number }).rowCount === 0) await knex.raw(`CREATE SCHEMA "${schema}"`);
    }
    await migrate();
  });
}

/** SQLSTATEs after which the whole transaction may simply run again. */
const RETRYABLE = new Set([
  '40001', // serialization_failure
  '40P01', // deadlock_detected: the server rolled one side back
]);

function sqlState(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

export function isRetryablePgError(err: unknown): boolean {
  const code = sqlState(err);
  return code !== undefined && RETRYABLE.has(code);
}

/**
 * True when PostgreSQL could not serve the request for now — unreachable, shutting down, out of
 * connections, or still conflicting after the retry budget — so the caller should retry: the
 * stores turn these into their 503 errors, not 500s.
 */
export function isPostgresUnavailable(err: unknown): boolean {
  const code = sqlState(err);
  if (code === undefined) return (err as { name?: unknown } | null)?.name === 'KnexTimeoutError';
  return (
    RETRYABLE.has(code) ||
    code.startsWith('08') || // connection_exception
    code === '53300' || // too_many_connections
    code === '57P01' || // admin_shutdown
    code === '57P02' || // crash_shutdown
    code === '57P03' || // cannot_connect_now
    code === 'ECONNREFUSED' ||
    code === 'ECONNRESET' ||
    code === 'ETIMEDOUT'
  );
}

/**
 * Runs `operation` — a whole transaction — again while PostgreSQL reports a serialization
 * failure or a deadlock (or what `retryable` adds), until `budgetMs` is spent. The PostgreSQL
 * counterpart of retryBusy for SQLite.
 */
export function retryPg<T>(
  operation: () => Promise<T>,
  budgetMs = 10_000,
  retryable: (err: unknown) => boolean = isRetryablePgError,
): Promise<T> {
  return retryTransaction(operation, retryable, budgetMs);
}
