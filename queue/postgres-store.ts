// The queue on PostgreSQL: several queue processes, on several hosts, share one database.
// The SQL is queue/sql/'s (with its PostgreSQL variants: the claim taking its rows with FOR
// UPDATE SKIP LOCKED and reading the server's clock itself); this dialect adds the server's
// clock read inside each other write transaction, after the rows a fenced write changes are
// locked, the write path on prepared statements (platform/postgres-writes.ts), and retries of
// serialization failures and deadlocks.
import type { Knex } from 'knex';
import { QueueError } from './errors.js';
import type { Dialect } from './dialect.js';
import { KnexQueueStore } from './knex-store.js';
import { LOCK_ROW, LOCK_ROW_NOW, LOCK_ROWS, LOCK_ROWS_NOW } from './sql/lock-row.js';
import { rowsOf, type Executor } from '../platform/sql.js';
import { channelOf, PostgresClaimableSignal } from './claimable.js';
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
import { postgresWrites, type PostgresWrites } from '../platform/postgres-writes.js';
import type { Clock, LateFinishPolicy } from './types.js';
import { checkRequiredOptions, type OptionNames } from '../platform/option-names.js';

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

export function postgresDialect(options: {
  schema: string | undefined;
  clock?: Clock;
  retryBudgetMs: number;
}): Dialect {
  const { clock, schema, retryBudgetMs } = options;
  // The write path of each knex handed in (one per store).
  const writers = new WeakMap<Knex, PostgresWrites>();
  const writesOn = (knex: Knex): PostgresWrites => {
    let writes = writers.get(knex);
    if (!writes) writers.set(knex, (writes = postgresWrites(knex)));
    return writes;
  };
  const now = async (executor: Executor): Promise<number> => {
    if (clock) return clock.now();
    const row = rowsOf(await executor.raw(SERVER_NOW, []))[0];
    return Number(row?.now);
  };
  return {
    sql: 'postgres',
    serverClock: clock === undefined,
    // READ COMMITTED is enough: every fencing check is one conditional UPDATE, which PostgreSQL
    // re-evaluates on the newest row version after waiting for a concurrent writer, and a claim
    // locks its rows before writing them. A holder's fenced write locks its row first, reading
    // the server's clock in the same statement once the lock is held (LOCK_ROW_NOW), so `now` is
    // read after any wait for that lock; a batch locks its rows the same way, in order of id
    // (LOCK_ROWS_NOW). Every decision in the transaction then uses that one reading of the one clock.
    write: (knex, work, lock) =>
      retryPg(
        () =>
          writesOn(knex).transaction(async (trx) => {
            if (lock === undefined) return work(trx, await now(trx));
            if (typeof lock !== 'string') {
              const ids = JSON.stringify(lock);
              if (clock) {
                await trx.raw(LOCK_ROWS.sql, LOCK_ROWS.bind({ ids }));
                return work(trx, clock.now());
              }
              const locked = rowsOf(await trx.raw(LOCK_ROWS_NOW.sql, LOCK_ROWS_NOW.bind({ ids })))[0];
              return work(trx, locked?.now != null ? Number(locked.now) : await now(trx));
            }
            if (clock) {
              await trx.raw(LOCK_ROW.sql, LOCK_ROW.bind({ id: lock }));
              return work(trx, clock.now());
            }
            const locked = rowsOf(await trx.raw(LOCK_ROW_NOW.sql, LOCK_ROW_NOW.bind({ id: lock })))[0];
            return work(trx, locked ? Number(locked.now) : await now(trx));
          }),
        retryBudgetMs,
      ),
    // One statement is its own transaction: a claim takes its rows SKIP LOCKED, never waiting,
    // and reads the server's clock itself (statement_timestamp()), so it needs neither a
    // transaction around it nor a clock read before it.
    writeStatement: (knex, work) =>
      retryPg(() => writesOn(knex).statement((executor) => work(executor, clock ? clock.now() : null)), retryBudgetMs),
    notifyChannel: channelOf(schema),
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
    claimableSignal: (knex) => new PostgresClaimableSignal(knex, schema),
  };
}

const POSTGRES_QUEUE_OPTION_NAMES: OptionNames<PostgresQueueOptions> = {
  connectionString: true,
  schema: true,
  clock: true,
  latePolicy: true,
  retryBudgetMs: true,
  poolMax: true,
};

/** Opens (and migrates, serialised across processes) a queue store on PostgreSQL. */
export async function openPostgresQueueStore(options: PostgresQueueOptions): Promise<KnexQueueStore> {
  checkRequiredOptions('openPostgresQueueStore', options, POSTGRES_QUEUE_OPTION_NAMES);
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
