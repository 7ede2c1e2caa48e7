// The prepared-statement cache of platform/sqlite-connection.ts on a real file: SQL that SQLite cannot
// compile is an error at once, on every path a store uses, and leaves the connection working.
// (node-sqlite3 never answers a run queued on a statement whose preparation failed.)
import { afterEach, describe, expect, test } from 'vitest';
import type { Knex } from 'knex';
import { join } from 'node:path';
import { openSqlite, type SqliteDatabase } from '../../platform/sqlite.js';
import { tempDir } from '../helpers/tmp.js';

const handles: SqliteDatabase[] = [];
afterEach(async () => {
  await Promise.all(handles.splice(0).map((h) => h.close()));
});

/** A fresh file with one table: knex and the write path on the same connection. */
async function setup(): Promise<{ knex: Knex; db: SqliteDatabase }> {
  const db = openSqlite({ filename: join(tempDir('leasehold-statements-'), 'db.sqlite') });
  handles.push(db);
  await db.knex.raw('CREATE TABLE counter (n INTEGER NOT NULL)');
  await db.knex.raw('INSERT INTO counter VALUES (0)');
  return { knex: db.knex, db };
}

/** `promise`'s outcome, or a failure naming what hung: a hang must fail the test, not time it out. */
async function settledWithin<T>(
  what: string,
  promise: Promise<T>,
  ms = 3_000,
): Promise<{ value: T } | { error: unknown }> {
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`expected ${what} to settle, but it had no answer after ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([
      promise.then(
        (value) => ({ value }),
        (error: unknown) => ({ error }),
      ),
      hung,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

async function expectSqlError(what: string, promise: Promise<unknown>, message: RegExp): Promise<void> {
  const outcome = await settledWithin(what, promise);
  if (!('error' in outcome))
    throw new Error(`expected ${what} to fail with ${message}, but it resolved with ${JSON.stringify(outcome.value)}`);
  expect(String(outcome.error), what).toMatch(message);
}

describe('SQL that SQLite cannot compile', () => {
  test('is an error at once through knex, again on a second try, and the connection keeps working', async () => {
    const { knex } = await setup();
    await expectSqlError('a query on a missing table', knex.raw('SELECT * FROM nope'), /no such table: nope/);
    await expectSqlError('the same query again', knex.raw('SELECT * FROM nope'), /no such table: nope/);
    await expectSqlError('a syntax error', knex.raw('SELEC 1'), /syntax error/);
    expect(await knex('counter').select('n')).toEqual([{ n: 0 }]);
  });

  test('is an error inside a knex transaction, which rolls back', async () => {
    const { knex } = await setup();
    const work = knex.transaction(async (trx) => {
      await trx('counter').update({ n: 1 });
      await trx('nope').insert({ n: 1 });
    });
    await expectSqlError('an insert into a missing table in a transaction', work, /no such table: nope/);
    expect(await knex('counter').select('n'), 'the update before it rolled back').toEqual([{ n: 0 }]);
  });

  test('is an error on the direct write path, which rolls back and leaves the next write working', async () => {
    const { knex, db } = await setup();
    const failing = db.write(async (executor) => {
      await executor.raw('UPDATE counter SET n = n + 1', []);
      await executor.raw('UPDATE nope SET n = 1', []);
    });
    await expectSqlError('an update of a missing table on the write path', failing, /no such table: nope/);
    await db.write((executor) => executor.raw('UPDATE counter SET n = n + 10', []));
    expect(await knex('counter').select('n'), 'only the second write committed').toEqual([{ n: 10 }]);
  });

  test('fails every run queued on it while it was being compiled, not only the first', async () => {
    const { knex, db } = await setup();
    const outcomes: ({ value: unknown } | { error: unknown })[] = [];
    const work = db.write(async (executor) => {
      // Three runs of one statement sent together: the second and third find it in the cache,
      // still being compiled.
      const runs = [0, 1, 2].map((i) =>
        settledWithin(`run ${i + 1} of 3`, executor.raw('SELECT n FROM nope WHERE n = ?', [i])),
      );
      outcomes.push(...(await Promise.all(runs)));
    });
    expect((await settledWithin('the transaction', work)) as object).not.toHaveProperty('error');
    expect(outcomes).toHaveLength(3);
    for (const outcome of outcomes) {
      expect('error' in outcome ? String(outcome.error) : `resolved: ${JSON.stringify(outcome)}`).toMatch(
        /no such table: nope/,
      );
    }
    expect(await knex('counter').select('n')).toEqual([{ n: 0 }]);
  });
});
