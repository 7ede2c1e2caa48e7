// The receiver's store on knex: the port (store.ts) built from one SQL operation per file
// (receiver/sql/) and a dialect (dialect.ts) that runs write transactions and decides driver
// errors. Every method ends in the dialect's `unavailable` on failure, outside its retries and
// group commit, so those still see the driver's own errors.
import type { Knex } from 'knex';
import { canonicalBody } from '../platform/effect-fields.js';
import type { Executor } from '../platform/sql.js';
import type { EffectDialect } from './dialect.js';
import type { Clock, EffectRequest } from './rules.js';
import { pruneBatch } from './sql/prune.js';
import { getEffect, listEffects, readJournal, readTotals } from './sql/reads.js';
import { recordIn } from './sql/record.js';
import { recordBatchIn } from './sql/record-batch.js';
import { resetIn } from './sql/reset.js';
import type { ApplyEffect, EffectStore, PageQuery, PruneOptions, Recorded } from './store.js';
import { checkRequiredOptions, type OptionNames } from '../platform/option-names.js';

export type { EffectDialect } from './dialect.js';

/** An EffectStore on knex; `knex` is its handle, for a caller that listens to its queries. */
export interface KnexEffectStore extends EffectStore<Knex.Transaction> {
  readonly knex: Knex;
  recordMany(
    requests: readonly EffectRequest[],
    clock: Clock,
    apply?: ApplyEffect<Knex.Transaction>,
  ): Promise<Recorded[]>;
}

export interface KnexEffectStoreOptions {
  /** A migrated database (`migrateReceiver`). */
  knex: Knex;
  /** The database's dialect (`postgresEffectDialect` for a PostgreSQL handle). */
  dialect: EffectDialect;
}

const DEFAULT_PRUNE_BATCH = 500;

/** Bodies are stored, compared and answered in their canonical form, whoever calls. */
function canonical(request: EffectRequest): EffectRequest {
  return request.body === undefined ? request : { ...request, body: canonicalBody(request.body) };
}

const KNEX_EFFECT_STORE_OPTION_NAMES: OptionNames<KnexEffectStoreOptions> = { knex: true, dialect: true };

/** An EffectStore over a migrated knex handle (SQLite 3.35+ or PostgreSQL). */
export function createKnexEffectStore(options: KnexEffectStoreOptions): KnexEffectStore {
  checkRequiredOptions('createKnexEffectStore', options, KNEX_EFFECT_STORE_OPTION_NAMES);
  const { knex, dialect } = options;
  const write = <T>(work: (executor: Executor) => Promise<T>): Promise<T> =>
    dialect.write ? dialect.write(knex, work) : dialect.transaction(knex, work);
  const rethrow = (err: unknown): never => {
    throw dialect.unavailable(err) ?? err;
  };

  return {
    knex,

    record(given: EffectRequest, clock: Clock, apply?: ApplyEffect<Knex.Transaction>): Promise<Recorded> {
      const request = canonical(given);
      // The clock is read inside the transaction, so `appliedAt` and journal times follow the
      // order in which requests were serialised. `apply` writes through knex, so only a request
      // that has one needs a knex transaction; the others take the dialect's leaner write path.
      const recorded = apply
        ? dialect.transaction(knex, (trx) => recordIn(trx, request, clock.now(), (effect) => apply(effect, trx)))
        : write((executor) => recordIn(executor, request, clock.now()));
      return recorded.catch(rethrow);
    },

    recordMany(given, clock, apply?: ApplyEffect<Knex.Transaction>): Promise<Recorded[]> {
      if (given.length === 0) return Promise.resolve([]);
      const requests = given.map(canonical);
      // One transaction for all, on the same two paths as a single request.
      const recorded = apply
        ? dialect.transaction(knex, (trx) => recordBatchIn(trx, requests, clock.now(), (effect) => apply(effect, trx)))
        : write((executor) => recordBatchIn(executor, requests, clock.now()));
      return recorded.catch(rethrow);
    },

    listEffects: (page) => listEffects(knex, page).catch(rethrow),
    getEffect: (jobId, key) => getEffect(knex, jobId, key).catch(rethrow),
    totals: () => readTotals(knex).catch(rethrow),
    journal: (page: PageQuery<number> = {}) => readJournal(knex, page).catch(rethrow),

    async pruneJournal(olderThan: number, options: PruneOptions = {}): Promise<number> {
      const batchSize = options.batchSize ?? DEFAULT_PRUNE_BATCH;
      if (!Number.isSafeInteger(batchSize) || batchSize < 1) {
        throw new RangeError(`batchSize must be a positive integer, not ${String(batchSize)}.`);
      }
      // Each batch is its own short write transaction, so recording requests wait for one batch
      // at most, never for the whole prune.
      let pruned = 0;
      while (!options.signal?.aborted) {
        const deleted = await write((executor) => pruneBatch(executor, olderThan, batchSize)).catch(rethrow);
        pruned += deleted;
        if (deleted < batchSize) break;
      }
      return pruned;
    },

    reset: () => write(resetIn).catch(rethrow),

    close: () => (dialect.close ? dialect.close(knex) : knex.destroy()),
  };
}
