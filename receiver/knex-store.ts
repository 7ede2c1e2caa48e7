// The knex implementation of EffectStore, opened on SQLite through queue/sqlite.ts. All of the
// receiver's SQL lives here, rows are mapped to Effect/JournalEntry objects in one place, and a
// database that stays locked or unreachable becomes the receiver's `busy` error here.
import { mkdir } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Knex } from 'knex';
import { GroupCommitter } from '../platform/group-commit.js';
import { isPostgresUnavailable } from '../platform/postgres.js';
import { isBusyError, openSqlite, retryBusy } from '../platform/sqlite.js';
import { ReceiverError } from './errors.js';
import { migrateReceiver } from './migrations/index.js';
import type { Effect, Outcome } from './rules.js';
import type { EffectStore, JournalEntry, Totals } from './store.js';

const EFFECTS = 'receiver_effects';
const JOURNAL = 'receiver_journal';

interface EffectRow {
  job_id: string;
  qty: number | string;
  token: number | string;
  applied_at: number | string;
  highest_token: number | string;
}

interface JournalRow {
  seq: number | string;
  job_id: string;
  qty: number | string;
  token: number | string;
  outcome: string;
  at: number | string;
}

// Number(): PostgreSQL's driver returns bigint columns as strings; SQLite returns numbers.
const toEffect = (row: EffectRow): Effect => ({
  jobId: row.job_id,
  qty: Number(row.qty),
  token: Number(row.token),
  appliedAt: Number(row.applied_at),
});

const toJournalEntry = (row: JournalRow): JournalEntry => ({
  seq: Number(row.seq),
  jobId: row.job_id,
  qty: Number(row.qty),
  token: Number(row.token),
  outcome: row.outcome as Outcome,
  at: Number(row.at),
});

/**
 * `503 busy` for a driver error meaning the database stayed locked or unreachable after the
 * retries, with that error as `cause`; undefined for any other error. The knex store runs on
 * SQLite and on PostgreSQL (openPostgresEffectStore builds on it), so it knows both drivers.
 */
function unavailable(err: unknown): ReceiverError | undefined {
  if (isBusyError(err)) {
    return new ReceiverError(
      'busy',
      'The receiver database stayed locked by another writer; retry the request shortly.',
      {},
      undefined,
      { cause: err },
    );
  }
  if (isPostgresUnavailable(err)) {
    return new ReceiverError(
      'busy',
      'The receiver could not reach its PostgreSQL database, or kept conflicting with other writers; retry the request shortly.',
      {},
      undefined,
      { cause: err },
    );
  }
  return undefined;
}

/**
 * Where every method that callers reach outside a transaction's `work` ends on failure. It
 * runs outside the retry and the group commit, so those still see the driver's own errors.
 */
function rethrow(err: unknown): never {
  throw unavailable(err) ?? err;
}

export interface KnexEffectStoreOptions {
  knex: Knex;
  /** Wraps each whole transaction, e.g. to retry it while SQLite reports SQLITE_BUSY. */
  retry?: <T>(operation: () => Promise<T>) => Promise<T>;
  /**
   * Let requests that arrive while a transaction runs share the next one (one fsync for
   * several effects); for a store whose transactions run one at a time, as on SQLite.
   */
  groupCommit?: boolean;
}

/**
 * An EffectStore over a knex handle whose transactions already exclude other writers
 * (openSqlite's BEGIN IMMEDIATE). The caller migrates the database first (`migrateReceiver`).
 */
export function createKnexEffectStore(options: KnexEffectStoreOptions): EffectStore<Knex.Transaction> {
  const { knex } = options;
  const retry = options.retry ?? (<T>(operation: () => Promise<T>) => operation());

  // No isRefusal: a write can fail after writing through the transaction (an apply callback
  // that throws halfway), so any error rolls the batch back and each write then runs alone,
  // where the error reaches the one request that threw it.
  const committer = options.groupCommit
    ? new GroupCommitter<Knex.Transaction>((batch) => retry(() => knex.transaction(batch)))
    : undefined;

  return {
    transaction: (work) => (committer ? committer.submit(work) : retry(() => knex.transaction(work))).catch(rethrow),

    async readJob(tx, jobId) {
      const row = (await tx<EffectRow>(EFFECTS).where({ job_id: jobId }).first()) as EffectRow | undefined;
      return row && { effect: toEffect(row), highestToken: Number(row.highest_token) };
    },

    async writeJob(tx, previous, next) {
      const { effect } = next;
      if (previous === undefined) {
        await tx(EFFECTS).insert({
          job_id: effect.jobId,
          qty: effect.qty,
          token: effect.token,
          applied_at: effect.appliedAt,
          highest_token: next.highestToken,
        });
        return true;
      }
      // The WHERE clause is the precondition: the row is still the one the rules judged.
      const updated = await tx(EFFECTS)
        .where({ job_id: effect.jobId, highest_token: previous.highestToken, qty: previous.effect.qty })
        .update({ highest_token: next.highestToken });
      return updated === 1;
    },

    async appendJournal(tx, entry) {
      const [row] = (await tx(JOURNAL)
        .insert({ job_id: entry.jobId, qty: entry.qty, token: entry.token, outcome: entry.outcome, at: entry.at })
        .returning('seq')) as Array<{ seq: number | string }>;
      return { seq: Number(row?.seq), ...entry };
    },

    async listEffects() {
      const rows = (await knex<EffectRow>(EFFECTS)
        .orderBy([{ column: 'applied_at' }, { column: 'job_id' }])
        .catch(rethrow)) as EffectRow[];
      return rows.map(toEffect);
    },

    async getEffect(jobId) {
      const row = (await knex<EffectRow>(EFFECTS).where({ job_id: jobId }).first().catch(rethrow)) as EffectRow | undefined;
      return row && toEffect(row);
    },

    async totals(): Promise<Totals> {
      const row = (await knex(EFFECTS).count({ effects: '*' }).sum({ qty: 'qty' }).first().catch(rethrow)) as
        | { effects: number | string; qty: number | string | null }
        | undefined;
      return { effects: Number(row?.effects ?? 0), qty: Number(row?.qty ?? 0) };
    },

    async journal() {
      const rows = (await knex<JournalRow>(JOURNAL).orderBy('seq').catch(rethrow)) as JournalRow[];
      return rows.map(toJournalEntry);
    },

    async reset() {
      await retry(() =>
        knex.transaction(async (tx) => {
          await tx(JOURNAL).delete();
          await tx(EFFECTS).delete();
        }),
      ).catch(rethrow);
    },

    close: () => knex.destroy(),
  };
}

export interface SqliteEffectStoreOptions {
  /** A file path (its parent directory is created) or `:memory:`. */
  filename: string;
  busyTimeoutMs?: number;
  /** How long one transaction keeps retrying while another process holds the lock. */
  busyBudgetMs?: number;
}

/** Opens, migrates and wraps one SQLite file: the receiver's default store. */
export async function openSqliteEffectStore(options: SqliteEffectStoreOptions): Promise<EffectStore<Knex.Transaction>> {
  if (options.filename !== ':memory:') await mkdir(dirname(options.filename), { recursive: true });
  const knex = openSqlite({ filename: options.filename, busyTimeoutMs: options.busyTimeoutMs });
  try {
    await retryBusy(() => migrateReceiver(knex), options.busyBudgetMs);
  } catch (err) {
    await knex.destroy();
    throw err;
  }
  const budgetMs = options.busyBudgetMs ?? 10_000;
  return createKnexEffectStore({ knex, retry: (operation) => retryBusy(operation, budgetMs), groupCommit: true });
}
