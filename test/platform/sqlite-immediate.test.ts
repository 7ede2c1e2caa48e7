// Why the stores' transactions begin IMMEDIATE: a deferred transaction that reads and then
// writes fails at once with SQLITE_BUSY when another connection took the write lock in
// between, whatever the busy timeout; an IMMEDIATE one waits for the lock and succeeds. Both
// write paths of platform/sqlite.ts begin IMMEDIATE: `write` on prepared statements, and
// `transaction`, a knex transaction on the connection platform/sqlite-connection.ts lends knex.
import { describe, expect, test } from 'vitest';
import knexFactory, { type Knex } from 'knex';
import { join } from 'node:path';
import { isBusyError, openSqlite, type SqliteDatabase } from '../../platform/sqlite.js';
import { openSqliteQueueStore } from '../../queue/index.js';
import { newJobInput } from '../queue/store.suite.js';
import { tempDir } from '../helpers/tmp.js';

const BUSY_TIMEOUT_MS = 3_000;

async function setup() {
  const filename = join(tempDir('leasehold-immediate-'), 'lock.sqlite');
  const holder = openSqlite({ filename, busyTimeoutMs: BUSY_TIMEOUT_MS });
  await holder.knex.raw('CREATE TABLE counter (n INTEGER NOT NULL)');
  await holder.knex.raw('INSERT INTO counter VALUES (0)');
  const handles: Array<Knex | SqliteDatabase> = [holder];
  const close = () => Promise.all(handles.map((h) => ('knex' in h ? h.close() : h.destroy())));
  return { filename, holder, handles, close };
}

/** Holds the write lock on `holder` until the returned release() is called. */
async function holdWriteLock(holder: SqliteDatabase): Promise<{ release: () => Promise<void> }> {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let locked!: () => void;
  const isLocked = new Promise<void>((resolve) => (locked = resolve));
  const done = holder.write(async (executor) => {
    await executor.raw('UPDATE counter SET n = n + 1', []);
    locked();
    await released;
  });
  await isLocked;
  return {
    release: async () => {
      release();
      await done;
    },
  };
}

describe('SQLite transactions', () => {
  test('openSqlite transactions send BEGIN IMMEDIATE', async () => {
    const { holder, close } = await setup();
    const seen: string[] = [];
    // What SQLite receives: knex announces its own `BEGIN;`, which the lent connection sends IMMEDIATE.
    holder.onStatement((sql) => seen.push(sql));
    await holder.transaction(async (trx) => {
      await trx.raw('SELECT n FROM counter');
    });
    await close();
    expect(seen[0]).toBe('BEGIN IMMEDIATE;');
  });

  test('openSqlite writes send BEGIN IMMEDIATE', async () => {
    const { holder, close } = await setup();
    const seen: string[] = [];
    holder.knex.on('query', (q: { sql: string }) => seen.push(q.sql));
    await holder.write(async (executor) => {
      await executor.raw('SELECT n FROM counter', []);
    });
    await close();
    expect(seen[0]).toBe('BEGIN IMMEDIATE');
  });

  test('a knex transaction holds the write lock before its first statement', async () => {
    const { filename, holder, handles, close } = await setup();
    const other = openSqlite({ filename, busyTimeoutMs: 0, busyBudgetMs: 0 });
    handles.push(other);
    let refused: unknown;
    await holder.transaction(async () => {
      refused = await other.write(async () => undefined).catch((err: unknown) => err);
    });
    await close();
    expect(isBusyError(refused), `expected SQLITE_BUSY for the other writer, got ${String(refused)}`).toBe(true);
  });

  test('a deferred read-then-write fails with SQLITE_BUSY at once, ignoring the busy timeout', async () => {
    const { filename, holder, handles, close } = await setup();
    const deferred = knexFactory({
      client: 'sqlite3',
      connection: { filename },
      useNullAsDefault: true,
      pool: {
        afterCreate: (
          conn: { exec: (sql: string, cb: (e: Error | null) => void) => void },
          done: (e: Error | null, c: unknown) => void,
        ) => conn.exec(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`, (e) => done(e, conn)),
      },
    });
    handles.push(deferred);
    let failure: unknown;
    let elapsedMs = 0;
    await deferred
      .transaction(async (trx) => {
        await trx.raw('SELECT n FROM counter'); // a shared lock, like a claim's select
        const lock = await holdWriteLock(holder); // another connection takes the write lock
        const started = performance.now();
        try {
          await trx.raw('UPDATE counter SET n = n + 10');
        } finally {
          elapsedMs = performance.now() - started;
          // The deferred transaction must give up its shared lock before the holder can commit.
          setTimeout(() => void lock.release(), 0);
        }
      })
      .catch((err: unknown) => {
        failure = err;
      });
    await close();
    expect(isBusyError(failure), `expected SQLITE_BUSY, got ${String(failure)}`).toBe(true);
    expect(elapsedMs, 'SQLITE_BUSY came without waiting for the busy timeout').toBeLessThan(BUSY_TIMEOUT_MS / 2);
  });

  test('an IMMEDIATE transaction waits for the write lock and then succeeds', async () => {
    const { filename, holder, handles, close } = await setup();
    const immediate = openSqlite({ filename, busyTimeoutMs: BUSY_TIMEOUT_MS });
    handles.push(immediate);
    const lock = await holdWriteLock(holder);
    const started = performance.now();
    const attempt = immediate.transaction(async (trx) => {
      const rows = await trx.raw('SELECT n FROM counter');
      await trx.raw('UPDATE counter SET n = ?', [rows[0].n + 10]);
    });
    setTimeout(() => void lock.release(), 300);
    await attempt;
    const elapsedMs = performance.now() - started;
    const [{ n }] = await immediate.knex.raw('SELECT n FROM counter');
    await close();
    expect(n, 'both writes applied: 1 by the holder, then 10 on top').toBe(11);
    expect(elapsedMs, 'waited for the holder to commit').toBeGreaterThanOrEqual(250);
  });

  test('an IMMEDIATE write waits for the write lock and then succeeds', async () => {
    const { filename, holder, handles, close } = await setup();
    const immediate = openSqlite({ filename, busyTimeoutMs: BUSY_TIMEOUT_MS });
    handles.push(immediate);
    const lock = await holdWriteLock(holder);
    const started = performance.now();
    const attempt = immediate.write(async (executor) => {
      const rows = (await executor.raw('SELECT n FROM counter', [])) as Array<{ n: number }>;
      await executor.raw('UPDATE counter SET n = ?', [rows[0]!.n + 10]);
    });
    setTimeout(() => void lock.release(), 300);
    await attempt;
    const elapsedMs = performance.now() - started;
    const [{ n }] = await immediate.knex.raw('SELECT n FROM counter');
    await close();
    expect(n, 'both writes applied: 1 by the holder, then 10 on top').toBe(11);
    expect(elapsedMs, 'waited for the holder to commit').toBeGreaterThanOrEqual(250);
  });
});

describe("the queue store's write path", () => {
  test('every write runs inside BEGIN IMMEDIATE ... COMMIT', async () => {
    const filename = join(tempDir('leasehold-immediate-'), 'queue.sqlite');
    const store = await openSqliteQueueStore({ filename });
    try {
      await store.enqueue(newJobInput({ id: 'a' }));
      const seen: string[] = [];
      store.knex.on('query', (q: { sql: string }) => seen.push(q.sql.trim().split(/\s+/).slice(0, 2).join(' ')));
      const lease = await store.claim('w1', 60_000);
      await store.finish('a', lease!, null);
      expect(seen).toEqual([
        'BEGIN IMMEDIATE',
        'UPDATE queue_jobs',
        'UPDATE queue_jobs',
        'COMMIT',
        'BEGIN IMMEDIATE',
        'UPDATE queue_jobs',
        'COMMIT',
      ]);
    } finally {
      await store.close();
    }
  });
});
