// The queue on PostgreSQL: several queue processes, on several hosts, share one database.
// The SQL is KnexQueueStore's; this dialect adds the claim's row pick with FOR UPDATE SKIP
// LOCKED, the database server's clock read inside each transaction, and retries of
// serialization failures and deadlocks.
import type { Knex } from 'knex';
import { QueueError } from './errors.js';
import { KnexQueueStore, type Dialect } from './knex-store.js';
import { rowsOf, type Executor } from '../platform/sql.js';
import { PostgresClaimableSignal } from './claimable.js';
import { unavailabilityOf, unavailableMessage } from '../platform/database-errors.js';
import { queueMigrations } from './migrations/index.js';
import {
  checkSchemaName,
  isPostgresUnavailable,
  migrateSerialised,
  openPostgres,
  parsePostgresUrl,
  retryPg,
} from '../platform/postgres.js';
import type { Clock, LateFinishPolicy } from './types.js';

export interface PostgresQueueOptions {
  /** `postgres://user:password@host:port/database`, optionally with `?schema=NAME`. */
  connectionString: string;
  /** The schema to use (created when missing); overrides `?schema=` in the URL. */
  schema?: string;
  /**
   * For tests only: replaces the database server's clock, so the store conformance suite can
   * drive time by hand. Left out, every lease decision uses the server's clock (rule 8).
   */
  clock?: Clock;
  latePolicy?: LateFinishPolicy;
  /** How long one write keeps retrying serialization failures and deadlocks. */
  retryBudgetMs?: number;
  /** Connections in this process's pool. */
  poolMax?: number;
}

/** The server's clock in epoch milliseconds; clock_timestamp() is the time of the call itself. */
const SERVER_NOW = `SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now`;

/**
 * Each branch walks its own partial index and stops after `limit` rows it can lock; rows another
 * claim has locked are skipped, not waited for. The better of the two is the claim. Unlike on
 * SQLite, the pick itself leaves out jobs the quarantine would make dead (deadline passed, or
 * expired with attempts spent): the sweep skips locked rows too, so a job it could not reach
 * must still never get a token. Each branch binds `now` once, as `c.now`, then its limit.
 */
const PICK_SQL = `WITH pending AS (
    SELECT j.seq, j.priority, j.run_at FROM queue_jobs j CROSS JOIN (SELECT ?::bigint AS now) c
    WHERE j.status = 'pending' AND j.run_at <= c.now AND (j.deadline IS NULL OR j.deadline > c.now)
    ORDER BY j.priority DESC, j.run_at, j.seq LIMIT ?
    FOR UPDATE OF j SKIP LOCKED
  ), expired AS (
    SELECT j.seq, j.priority, j.run_at FROM queue_jobs j CROSS JOIN (SELECT ?::bigint AS now) c
    WHERE j.status = 'leased' AND j.lease_until <= c.now AND j.attempts < j.max_attempts
      AND (j.deadline IS NULL OR j.deadline > c.now)
    ORDER BY j.priority DESC, j.run_at, j.seq LIMIT ?
    FOR UPDATE OF j SKIP LOCKED
  )
  SELECT seq FROM (SELECT * FROM pending UNION ALL SELECT * FROM expired) AS best
  ORDER BY priority DESC, run_at, seq LIMIT ?`;

export function postgresDialect(options: {
  schema: string | undefined;
  clock?: Clock;
  retryBudgetMs: number;
}): Dialect {
  const { clock, schema, retryBudgetMs } = options;
  const now = async (executor: Executor): Promise<number> => {
    if (clock) return clock.now();
    const row = rowsOf(await executor.raw(SERVER_NOW, []))[0];
    return Number(row?.now);
  };
  return {
    // READ COMMITTED is enough: every fencing check is one conditional UPDATE, which PostgreSQL
    // re-evaluates on the newest row version after waiting for a concurrent writer, and a claim
    // locks its row before writing it. `now` is read first, inside the transaction, so every
    // decision in it uses one instant of the one clock.
    write: (knex, work) => retryPg(() => knex.transaction(async (trx) => work(trx, await now(trx))), retryBudgetMs),
    now,
    migrate: (knex: Knex) => migrateSerialised(knex, schema, () => knex.migrate.latest(queueMigrations)),
    unavailable: (err) => {
      const condition = unavailabilityOf(err);
      if (condition)
        return new QueueError('queue_unavailable', unavailableMessage(condition, 'queue'), {}, { cause: err });
      return isPostgresUnavailable(err)
        ? new QueueError(
            'queue_unavailable',
            'The PostgreSQL database could not be reached, or kept conflicting for longer than the retry budget. Retry the request.',
            {},
            { cause: err },
          )
        : undefined;
    },
    pickSql: PICK_SQL,
    idListSql: 'SELECT jsonb_array_elements_text(?::jsonb)',
    // Concurrent claims each run the quarantine sweep; skipping rows another transaction holds
    // means sweeps never wait on each other nor deadlock (the pick above covers what is skipped).
    sweepLock: 'FOR UPDATE SKIP LOCKED',
    claimableSignal: (knex) => new PostgresClaimableSignal(knex, schema),
  };
}

/** Opens (and migrates, serialised across processes) a queue store on PostgreSQL. */
export async function openPostgresQueueStore(options: PostgresQueueOptions): Promise<KnexQueueStore> {
  const target = parsePostgresUrl(options.connectionString);
  const schema = checkSchemaName(options.schema) ?? target.schema;
  const knex = openPostgres({ connectionString: target.connectionString, schema, poolMax: options.poolMax });
  const dialect = postgresDialect({
    schema,
    ...(options.clock ? { clock: options.clock } : {}),
    retryBudgetMs: options.retryBudgetMs ?? 10_000,
  });
  return KnexQueueStore.open(knex, dialect, options.latePolicy ?? 'reject');
}
