// The receiver on one SQLite file: the embedded default. Several processes may share the file;
// each write is a short BEGIN IMMEDIATE transaction, retried while SQLite reports SQLITE_BUSY,
// and writes that arrive together in one process share a transaction (group commit).
import { dirname } from 'node:path';
import { makeDirectory } from '../platform/directories.js';
import { unavailabilityOf, unavailableMessage } from '../platform/database-errors.js';
import { isBusyError, openSqlite, retryBusy, type SqliteDatabase, type SqliteJournal } from '../platform/sqlite.js';
import type { EffectDialect } from './dialect.js';
import { ReceiverError } from './errors.js';
import { createKnexEffectStore, type KnexEffectStore } from './knex-store.js';
import { migrateReceiver } from './migrations/index.js';
import { checkRequiredOptions, type OptionNames } from '../platform/option-names.js';

export interface SqliteEffectStoreOptions {
  /** A file path (its parent directory is created) or `:memory:`. */
  filename: string;
  busyTimeoutMs?: number;
  /** How long one transaction keeps retrying while another process holds the lock. */
  busyBudgetMs?: number;
  /** Default `delete` (the rollback journal); `wal` is as durable (synchronous stays FULL). */
  journal?: SqliteJournal;
}

/**
 * Both write paths run on the database's one connection and its one group committer
 * (platform/sqlite.ts). A request without `apply` (every request the receiver itself serves), a
 * prune batch and reset() send prepared statements straight to the driver inside BEGIN
 * IMMEDIATE. An `apply` callback is handed a Knex.Transaction, the type embedders write with
 * (`tx('shipments')`, `tx.schema`), so a batch holding a request with one runs as a knex
 * transaction, begun IMMEDIATE too. Either way the clock is read after the write lock is held.
 *
 * The committer takes no error for a refusal: fenced and conflict are answers, not errors. Any
 * error rolls the batch back, and each write then runs alone, where the error reaches the
 * request it belongs to.
 */
export function sqliteEffectDialect(db: SqliteDatabase): EffectDialect {
  return {
    transaction: (_knex, work) => db.transaction(work),
    write: (_knex, work) => db.write(work),
    unavailable: sqliteUnavailable,
    close: () => db.close(),
  };
}

/** SQLite's full, read-only and I/O conditions, and a lock still held past the retries. */
function sqliteUnavailable(err: unknown): ReceiverError | undefined {
  const condition = unavailabilityOf(err);
  const message = condition
    ? unavailableMessage(condition, 'receiver')
    : isBusyError(err)
      ? 'The receiver database stayed locked by another writer; retry the request shortly.'
      : undefined;
  return message === undefined ? undefined : new ReceiverError('busy', message, {}, undefined, { cause: err });
}

const SQLITE_EFFECT_STORE_OPTION_NAMES: OptionNames<SqliteEffectStoreOptions> = {
  filename: true,
  busyTimeoutMs: true,
  busyBudgetMs: true,
  journal: true,
};

/** Opens, migrates and wraps one SQLite file: the receiver's default store. */
export async function openSqliteEffectStore(options: SqliteEffectStoreOptions): Promise<KnexEffectStore> {
  checkRequiredOptions('openSqliteEffectStore', options, SQLITE_EFFECT_STORE_OPTION_NAMES);
  if (options.filename !== ':memory:') makeDirectory(dirname(options.filename));
  const db = openSqlite({
    filename: options.filename,
    busyTimeoutMs: options.busyTimeoutMs,
    busyBudgetMs: options.busyBudgetMs ?? 10_000,
    ...(options.journal ? { journal: options.journal } : {}),
  });
  try {
    await retryBusy(() => migrateReceiver(db.knex), options.busyBudgetMs);
  } catch (err) {
    await db.close();
    throw err;
  }
  return createKnexEffectStore({ knex: db.knex, dialect: sqliteEffectDialect(db) });
}
