// The receiver on one SQLite file: the embedded default. Several processes may share the file;
// each write is a short BEGIN IMMEDIATE transaction, retried while SQLite reports SQLITE_BUSY,
// and writes that arrive together in one process share a transaction (group commit).
import { mkdir } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Knex } from 'knex';
import { unavailabilityOf, unavailableMessage } from '../platform/database-errors.js';
import { GroupCommitter } from '../platform/group-commit.js';
import {
  isBusyError,
  openSqlite,
  retryBusy,
  withImmediateTransaction,
  type SqliteExecutor,
  type SqliteJournal,
} from '../platform/sqlite.js';
import type { EffectDialect } from './dialect.js';
import { ReceiverError } from './errors.js';
import { createKnexEffectStore, type KnexEffectStore } from './knex-store.js';
import { migrateReceiver } from './migrations/index.js';

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
 * Two write paths on the store's one connection, each with its own group commit. An `apply`
 * callback is handed a Knex.Transaction, the type embedders write with (`tx('shipments')`,
 * `tx.schema`), so a request with one runs in a knex transaction: openSqlite's client begins it
 * IMMEDIATE and still reuses prepared statements. A request without one (every request the
 * receiver itself serves) and reset() skip knex and send prepared statements straight to the
 * driver inside BEGIN IMMEDIATE, as the queue's writes do.
 *
 * Neither committer takes any error for a refusal: fenced and conflict are answers, not
 * errors, and an `apply` may fail after writing through the transaction. Any error rolls the
 * batch back, and each write then runs alone, where the error reaches the request it belongs to.
 */
export function sqliteEffectDialect(busyBudgetMs: number): EffectDialect {
  let knexCommitter: GroupCommitter<Knex.Transaction> | undefined;
  let driverCommitter: GroupCommitter<SqliteExecutor> | undefined;
  return {
    transaction: (knex, work) => {
      knexCommitter ??= new GroupCommitter((batch) => retryBusy(() => knex.transaction(batch), busyBudgetMs));
      return knexCommitter.submit(work);
    },
    write: (knex, work) => {
      driverCommitter ??= new GroupCommitter((batch) =>
        retryBusy(() => withImmediateTransaction(knex, batch), busyBudgetMs),
      );
      return driverCommitter.submit(work);
    },
    unavailable: sqliteUnavailable,
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

/** Opens, migrates and wraps one SQLite file: the receiver's default store. */
export async function openSqliteEffectStore(options: SqliteEffectStoreOptions): Promise<KnexEffectStore> {
  if (options.filename !== ':memory:') await mkdir(dirname(options.filename), { recursive: true });
  const knex = openSqlite({
    filename: options.filename,
    busyTimeoutMs: options.busyTimeoutMs,
    ...(options.journal ? { journal: options.journal } : {}),
  });
  try {
    await retryBusy(() => migrateReceiver(knex), options.busyBudgetMs);
  } catch (err) {
    await knex.destroy();
    throw err;
  }
  return createKnexEffectStore({ knex, dialect: sqliteEffectDialect(options.busyBudgetMs ?? 10_000) });
}
