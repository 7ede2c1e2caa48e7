// platform/sqlite.ts against a second real connection on the same file: a COMMIT that SQLite
// refuses is rolled back on both write paths, so the connection carries no open transaction to
// its next holder; and the receiver's `apply` path reads its clock only once it holds the lock.
import { describe, expect, onTestFinished, test } from 'vitest';
import { join } from 'node:path';
import sqlite3 from 'sqlite3';
import { isBusyError, openSqlite, type SqliteDatabase } from '../../platform/sqlite.js';
import { openSqliteEffectStore, recordEffect } from '../../receiver/index.js';
import { holdWriteLock } from '../helpers/sqlite-lock.js';
import { tempDir } from '../helpers/tmp.js';

function opened(db: SqliteDatabase): SqliteDatabase {
  onTestFinished(() => db.close());
  return db;
}

async function setup() {
  const filename = join(tempDir('leasehold-commit-'), 'db.sqlite');
  // Impatient: a refused COMMIT comes after 30 ms, and the transaction is tried again for 150 ms.
  const db = opened(openSqlite({ filename, busyTimeoutMs: 30, busyBudgetMs: 150 }));
  await db.knex.raw('CREATE TABLE counter (n INTEGER NOT NULL)');
  await db.knex.raw('INSERT INTO counter VALUES (0)');
  return { filename, db };
}

describe('a COMMIT that SQLite refuses', () => {
  for (const path of ['write', 'transaction'] as const) {
    test(`on the ${path} path is rolled back: nothing is written, and the connection's next transaction works`, async () => {
      const { filename, db } = await setup();
      const reader = await openDeferredReader(filename);
      const write = () =>
        path === 'write'
          ? db.write((executor) => executor.raw('UPDATE counter SET n = n + 1', []))
          : db.transaction((trx) => trx.raw('UPDATE counter SET n = n + 1'));
      const refused = await write().then(
        () => 'committed',
        (err: unknown) => err,
      );
      expect(isBusyError(refused), `expected SQLITE_BUSY from COMMIT, got ${String(refused)}`).toBe(true);
      await reader.release();
      expect(await db.knex('counter').select('n'), 'the refused write was rolled back').toEqual([{ n: 0 }]);
      // An open transaction left behind would make this BEGIN fail ("within a transaction").
      await write();
      await db.transaction((trx) => trx.raw('UPDATE counter SET n = n + 10'));
      expect(await db.knex('counter').select('n')).toEqual([{ n: 11 }]);
    });
  }
});

describe("the receiver's apply path", () => {
  test('reads the clock only after the write lock is held, however long another connection kept it', async () => {
    const filename = join(tempDir('leasehold-commit-'), 'receiver.sqlite');
    const store = await openSqliteEffectStore({ filename, busyTimeoutMs: 5_000 });
    onTestFinished(() => store.close());
    const release = await holdWriteLock(filename);
    const clock = { now: () => Date.now() };
    let applied = 0;
    const recorded = recordEffect(store, { jobId: 'a', qty: 1, token: 1 }, clock, async () => {
      applied++;
    });
    await new Promise((resolve) => setTimeout(resolve, 300));
    const releasedAt = Date.now();
    await release();
    const { judgement, journal } = await recorded;
    expect(judgement.outcome).toBe('applied');
    expect(applied).toBe(1);
    expect(judgement.state.effect!.appliedAt, 'appliedAt is read after the lock was released').toBeGreaterThanOrEqual(
      releasedAt,
    );
    expect(journal.at).toBe(judgement.state.effect!.appliedAt);
  });
});

/** A plain sqlite3 connection in a deferred read transaction, holding its shared lock. */
async function openDeferredReader(filename: string): Promise<{ release: () => Promise<void> }> {
  const conn = await new Promise<sqlite3.Database>((resolve, reject) => {
    const handle = new sqlite3.Database(filename, (err) => (err ? reject(err) : resolve(handle)));
  });
  const run = (sql: string) =>
    new Promise<void>((resolve, reject) => conn.all(sql, [], (err) => (err ? reject(err) : resolve())));
  await run('BEGIN');
  await run('SELECT n FROM counter');
  let open = true;
  const release = async () => {
    if (!open) return;
    open = false;
    await run('ROLLBACK');
    await new Promise<void>((resolve) => conn.close(() => resolve()));
  };
  onTestFinished(release);
  return { release };
}
