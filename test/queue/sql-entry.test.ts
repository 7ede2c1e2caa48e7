// queue/sql/index.ts, the queue's SQL operations as the benchmark uses them: on a migrated file,
// through platform/sqlite.ts's write path and on a bare driver connection, they enqueue, claim
// and finish exactly as the store does, and a stale finish is refused.
import { describe, expect, onTestFinished, test } from 'vitest';
import { join } from 'node:path';
import sqlite3 from 'sqlite3';
import { openSqlite } from '../../platform/sqlite.js';
import type { Executor } from '../../platform/sql.js';
import { openSqliteQueueStore, QueueError } from '../../queue/index.js';
import { claimManyIn, enqueueIn, finishIn } from '../../queue/sql/index.js';
import { tempDir } from '../helpers/tmp.js';
import { newJobInput } from './store.suite.js';

async function migratedFile(): Promise<string> {
  const filename = join(tempDir('leasehold-sql-entry-'), 'q.sqlite');
  const store = await openSqliteQueueStore({ filename });
  await store.close();
  return filename;
}

describe('the queue SQL entry point', () => {
  test("on platform/sqlite.ts's write path: enqueue, claim in claim order, finish, and a stale finish refused", async () => {
    const filename = await migratedFile();
    const db = openSqlite({ filename });
    onTestFinished(() => db.close());
    await db.write(async (executor) => {
      await enqueueIn(executor, newJobInput({ id: 'low', priority: 0 }), 1_000);
      await enqueueIn(executor, newJobInput({ id: 'high', priority: 5 }), 1_000);
    });
    const leases = await db.write((executor) => claimManyIn(executor, 'sqlite', 'w1', 500, 2, 1_000));
    expect(leases.map(({ id, owner, token, leaseUntil }) => ({ id, owner, token, leaseUntil }))).toEqual([
      { id: 'high', owner: 'w1', token: 1, leaseUntil: 1_500 },
      { id: 'low', owner: 'w1', token: 1, leaseUntil: 1_500 },
    ]);
    const done = await db.write((executor) => finishIn(executor, 'reject', 'high', leases[0]!, 'ok', 1_499));
    expect({ status: done.status, result: done.result }).toEqual({ status: 'done', result: 'ok' });
    const late = await db
      .write((executor) => finishIn(executor, 'reject', 'low', leases[1]!, null, 1_500))
      .catch((err: unknown) => err);
    expect(late).toBeInstanceOf(QueueError);
    expect(late).toMatchObject({ code: 'stale_lease', details: { reason: 'lease_expired' } });
    const store = await openSqliteQueueStore({ filename });
    onTestFinished(() => store.close());
    expect(await store.stats()).toEqual({ pending: 0, leased: 1, done: 1, dead: 0 });
  });

  test('on a bare driver connection, with positional bindings only', async () => {
    const filename = await migratedFile();
    const conn = await new Promise<sqlite3.Database>((resolve, reject) => {
      const handle = new sqlite3.Database(filename, (err) => (err ? reject(err) : resolve(handle)));
    });
    onTestFinished(() => new Promise<void>((resolve) => conn.close(() => resolve())));
    const executor: Executor = {
      raw: (sql, bindings) =>
        new Promise((resolve, reject) =>
          conn.all(sql, [...bindings], (err, rows) => (err ? reject(err) : resolve(rows))),
        ),
    };
    await enqueueIn(executor, newJobInput({ id: 'a' }), 10);
    const [lease] = await claimManyIn(executor, 'sqlite', 'w1', 100, 1, 10);
    expect(lease).toMatchObject({ id: 'a', owner: 'w1', token: 1, attempt: 1, leaseUntil: 110 });
    expect((await finishIn(executor, 'reject', 'a', lease!, null, 50)).status).toBe('done');
  });
});
