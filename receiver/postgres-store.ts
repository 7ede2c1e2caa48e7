// The receiver on PostgreSQL: several receiver processes share one database and still record
// each job's effect once. The SQL is the knex store's; this adds the per-job row lock that
// PostgreSQL needs where SQLite's BEGIN IMMEDIATE excluded every other writer.
import type { Knex } from 'knex';
import {
  checkSchemaName,
  isRetryablePgError,
  migrateSerialised,
  openPostgres,
  parsePostgresUrl,
  retryPg,
} from '../platform/postgres.js';
import { createKnexEffectStore } from './knex-store.js';
import { migrateReceiver } from './migrations/index.js';
import type { EffectStore } from './store.js';

export interface PostgresEffectStoreOptions {
  /** `postgres://user:password@host:port/database`, optionally with `?schema=NAME`. */
  connectionString: string;
  /** The schema to use (created when missing); overrides `?schema=` in the URL. */
  schema?: string;
  /** How long one transaction keeps retrying lost races, serialization failures and deadlocks. */
  retryBudgetMs?: number;
  /** Connections in this process's pool. */
  poolMax?: number;
}

/**
 * Two first requests for one job both read "no row" (there was nothing to lock) and both
 * insert; the primary key lets one commit and fails the other with a unique violation. That
 * transaction runs again from the start and then finds, and locks, the winner's row.
 */
function lostFirstEffectRace(err: unknown): boolean {
  const e = err as { code?: unknown; table?: unknown } | null;
  return e?.code === '23505' && e.table === 'receiver_effects';
}

/** Opens (and migrates, serialised across processes) the receiver's store on PostgreSQL. */
export async function openPostgresEffectStore(options: PostgresEffectStoreOptions): Promise<EffectStore<Knex.Transaction>> {
  const target = parsePostgresUrl(options.connectionString);
  const schema = checkSchemaName(options.schema) ?? target.schema;
  const knex = openPostgres({ connectionString: target.connectionString, schema, poolMax: options.poolMax });
  try {
    await migrateSerialised(knex, schema, () => migrateReceiver(knex));
  } catch (err) {
    await knex.destroy();
    throw err;
  }
  const budgetMs = options.retryBudgetMs ?? 10_000;
  const base = createKnexEffectStore({
    knex,
    retry: (operation) => retryPg(operation, budgetMs, (err) => isRetryablePgError(err) || lostFirstEffectRace(err)),
  });
  return {
    ...base,
    async readJob(tx, jobId) {
      // The job's row stays locked until the transaction ends, so a racing request for the
      // same job waits here and then reads this one's outcome: read, judge and write are one
      // step per job, as under SQLite's single writer. Other jobs are not held up.
      const locked = await tx.raw('SELECT 1 FROM receiver_effects WHERE job_id = ? FOR UPDATE', [jobId]);
      // No row, no lock: answer "none" from this same statement, never from a later read that
      // could see a row inserted meanwhile without holding its lock. If another request inserts
      // first, this one's insert fails on the primary key and the transaction runs again.
      if ((locked as { rowCount: number }).rowCount === 0) return undefined;
      return base.readJob(tx, jobId);
    },
  };
}
