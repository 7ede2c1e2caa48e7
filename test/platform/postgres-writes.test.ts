// platform/postgres-writes.ts on a real server: prepared statements on connections borrowed from
// knex's pool, transactions that commit or roll back as a whole, a failed statement that leaves
// its connection usable, and `?` inside quoted text left as it is.
import { afterEach, describe, expect, test } from 'vitest';
import type { Knex } from 'knex';
import { openPostgres, parsePostgresUrl } from '../../platform/postgres.js';
import { postgresWrites } from '../../platform/postgres-writes.js';
import { rowsOf } from '../../platform/sql.js';
import { testSchema } from '../helpers/postgres.js';

const handles: Knex[] = [];
afterEach(async () => {
  await Promise.all(handles.splice(0).map((k) => k.destroy()));
});

async function setup(poolMax = 2): Promise<Knex> {
  const { url } = testSchema('lh_writes');
  const target = parsePostgresUrl(url);
  const knex = openPostgres({ ...target, poolMax });
  handles.push(knex);
  await knex.raw(`CREATE SCHEMA IF NOT EXISTS "${target.schema}"`);
  await knex.raw('CREATE TABLE counter (name text PRIMARY KEY, n bigint NOT NULL)');
  await knex.raw(`INSERT INTO counter VALUES ('a', 0)`);
  return knex;
}

const count = async (knex: Knex) => Number(rowsOf(await knex.raw(`SELECT n FROM counter WHERE name = 'a'`))[0]!.n);

describe('writes on prepared statements', () => {
  test('a transaction commits as a whole, and the same statement runs again on every connection', async () => {
    const knex = await setup();
    const writes = postgresWrites(knex);
    const add = 'UPDATE counter SET n = n + ? WHERE name = ? RETURNING n';
    const answers = await Promise.all(
      [1, 2, 3, 4, 5, 6].map((k) =>
        writes.transaction(async (executor) => rowsOf(await executor.raw(add, [k, 'a'])).length),
      ),
    );
    expect(answers).toEqual([1, 1, 1, 1, 1, 1]);
    expect(await count(knex)).toBe(21);
  });

  test('a failure inside a transaction rolls all of it back, and the connection goes on working', async () => {
    const knex = await setup(2);
    const writes = postgresWrites(knex);
    const failed = await writes
      .transaction(async (executor) => {
        await executor.raw('UPDATE counter SET n = n + ? WHERE name = ?', [10, 'a']);
        await executor.raw('UPDATE counter SET n = n / ? WHERE name = ?', [0, 'a']);
      })
      .catch((err: unknown) => err);
    expect(String(failed)).toMatch(/division by zero/);
    expect(await count(knex), 'the first update rolled back').toBe(0);
    // Every connection of the pool is usable afterwards, outside a transaction or in one.
    for (let i = 0; i < 4; i++)
      await writes.statement(async (executor) => executor.raw('UPDATE counter SET n = n + ?', [1]));
    await writes.transaction(async (executor) => executor.raw('UPDATE counter SET n = n + ?', [1]));
    expect(await count(knex)).toBe(5);
  });

  test('a `?` inside quoted text is not a parameter', async () => {
    const knex = await setup();
    const writes = postgresWrites(knex);
    const rows = rowsOf(
      await writes.statement(async (executor) =>
        executor.raw(`SELECT 'why?' AS said, CAST(? AS bigint) AS k FROM counter`, [7]),
      ),
    );
    expect(rows).toEqual([{ said: 'why?', k: '7' }]);
  });
});
