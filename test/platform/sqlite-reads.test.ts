// platform/sqlite.ts's `reads`: in WAL on a file, a second connection that only reads, and reads
// beside an open write transaction, seeing what committed before the read and nothing still open;
// in the rollback journal and in memory, the one connection itself.
import { describe, expect, onTestFinished, test } from 'vitest';
import { join } from 'node:path';
import { openSqlite, type SqliteDatabase, type SqliteJournal } from '../../platform/sqlite.js';
import { holdWrite } from '../helpers/sqlite-lock.js';
import { tempDir } from '../helpers/tmp.js';

async function opened(journal: SqliteJournal, filename?: string): Promise<SqliteDatabase> {
  const db = openSqlite({ filename: filename ?? join(tempDir('leasehold-reads-'), 'db.sqlite'), journal });
  onTestFinished(() => db.close());
  await db.knex.raw('CREATE TABLE rows (n INTEGER NOT NULL)');
  await db.knex.raw('INSERT INTO rows VALUES (1)');
  return db;
}

const count = async (knex: SqliteDatabase['reads']) =>
  Number(((await knex('rows').count({ n: '*' })) as Array<{ n: number }>)[0]!.n);

describe('reads in WAL', () => {
  test('answer while a write transaction is open, and see only what committed before them', async () => {
    const db = await opened('wal');
    expect(db.reads, 'in WAL, reads go to a connection of their own').not.toBe(db.knex);
    const write = await holdWrite(db, (executor) => executor.raw('INSERT INTO rows VALUES (2)', []));
    onTestFinished(() => write.end());
    expect(await count(db.reads), 'a read during the open transaction sees the row committed before it only').toBe(1);
    expect(write.committed(), 'the read answered while the write transaction was still open').toBe(false);
    await write.end();
    expect(await count(db.reads), 'a read after the COMMIT sees the row').toBe(2);
  });

  test('cannot write', async () => {
    const db = await opened('wal');
    const attempt = await db.reads.raw('INSERT INTO rows VALUES (3)').then(
      () => 'written',
      (err: unknown) => String(err),
    );
    expect(attempt, 'a write on the reads connection').toMatch(/readonly|read-only/i);
    expect(await count(db.knex), 'rows after the refused write').toBe(1);
  });
});

describe('reads without WAL', () => {
  test('in the rollback journal go to the one connection: a reader would hold up the COMMIT', async () => {
    const db = await opened('delete');
    expect(db.reads).toBe(db.knex);
  });

  test('in memory go to the one connection: a second one would open another database', async () => {
    const db = await opened('wal', ':memory:');
    expect(db.reads).toBe(db.knex);
  });
});
