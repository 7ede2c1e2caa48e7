// The receiver on PostgreSQL: several receiver processes share one database and still record
// each job's effect once. The SQL is the knex store's; this dialect adds retries of
// serialization failures and deadlocks.
import { unavailabilityOf, unavailableMessage } from '../platform/database-errors.js';
import {
  checkSchemaName,
  isPostgresUnavailable,
  migrateSerialised,
  openPostgres,
  parsePostgresUrl,
  retryPg,
} from '../platform/postgres.js';
import type { EffectDialect } from './dialect.js';
import { ReceiverError } from './errors.js';
import { createKnexEffectStore, type KnexEffectStore } from './knex-store.js';
import { migrateReceiver } from './migrations/index.js';
import { checkRequiredOptions, type OptionNames } from '../platform/option-names.js';

export interface PostgresEffectStoreOptions {
  /** `postgres://user:password@host:port/database`, optionally with `?schema=NAME`. */
  connectionString: string;
  /** The schema to use (created when missing); overrides `?schema=` in the URL. */
  schema?: string;
  /** How long one transaction keeps retrying serialization failures and deadlocks. */
  retryBudgetMs?: number;
  /** Connections in this process's pool. */
  poolMax?: number;
}

/**
 * READ COMMITTED is enough, and no explicit lock is taken: recording is one INSERT ... ON
 * CONFLICT DO UPDATE ... WHERE, which waits for a concurrent writer of the same job, decides on
 * its committed row and keeps that row locked to the end of the transaction, refusing or not.
 * Two first requests for a job therefore never both insert (no unique violation to retry), and
 * each request's journal entry is written while it holds the job. Other jobs are not held up.
 * Retries remain for deadlocks and serialization failures, which an `apply` writing other
 * tables may meet.
 */
export function postgresEffectDialect(retryBudgetMs: number): EffectDialect {
  return {
    transaction: (knex, work) => retryPg(() => knex.transaction(work), retryBudgetMs),
    unavailable: postgresUnavailable,
  };
}

/** PostgreSQL's full, read-only and I/O conditions, and a server unreachable or still conflicting. */
function postgresUnavailable(err: unknown): ReceiverError | undefined {
  const condition = unavailabilityOf(err);
  const message = condition
    ? unavailableMessage(condition, 'receiver')
    : isPostgresUnavailable(err)
      ? 'The receiver could not reach its PostgreSQL database, or kept conflicting with other writers; retry the request shortly.'
      : undefined;
  return message === undefined ? undefined : new ReceiverError('busy', message, {}, undefined, { cause: err });
}

const POSTGRES_EFFECT_STORE_OPTION_NAMES: OptionNames<PostgresEffectStoreOptions> = {
  connectionString: true,
  schema: true,
  retryBudgetMs: true,
  poolMax: true,
};

/** Opens (and migrates, serialised across processes) the receiver's store on PostgreSQL. */
export async function openPostgresEffectStore(options: PostgresEffectStoreOptions): Promise<KnexEffectStore> {
  checkRequiredOptions('openPostgresEffectStore', options, POSTGRES_EFFECT_STORE_OPTION_NAMES);
  const target = parsePostgresUrl(options.connectionString);
  const schema = checkSchemaName(options.schema) ?? target.schema;
  const knex = openPostgres({ connectionString: target.connectionString, schema, poolMax: options.poolMax });
  try {
    await migrateSerialised(knex, schema, () => migrateReceiver(knex));
  } catch (err) {
    await knex.destroy();
    throw err;
  }
  return createKnexEffectStore({ knex, dialect: postgresEffectDialect(options.retryBudgetMs ?? 10_000) });
}
