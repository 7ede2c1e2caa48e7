// The receiver store conformance suite on real SQLite files, plus SQLite-only schema checks.
import { describe, expect, test } from 'vitest';
import { openSqlite } from '../../queue/sqlite.js';
import { openSqliteEffectStore, RECEIVER_MIGRATIONS_TABLE } from '../../receiver/index.js';
import { tempDir } from '../helpers/tmp.js';
import { join } from 'node:path';
import { closeAfterTest, sqliteStore } from './setup.js';
import { effectStoreSuite } from './store.suite.js';

effectStoreSuite('sqlite', async () => {
  const { store, openAnother } = await sqliteStore();
  return { store, openAnother };
});

describe('receiver sqlite schema', () => {
  test('migrations use receiver_ tables and their own bookkeeping table, and run again harmlessly', async () => {
    const filename = join(tempDir('leasehold-receiver-'), 'nested', 'dir', 'shared.sqlite');
    const first = await openSqliteEffectStore({ filename });
    await first.close();
    const again = await openSqliteEffectStore({ filename });
    closeAfterTest(() => again.close());

    const knex = openSqlite({ filename });
    closeAfterTest(() => knex.destroy());
    const tables = (await knex('sqlite_master').where({ type: 'table' }).pluck('name')) as string[];
    expect(tables.filter((t) => t !== 'sqlite_sequence').sort()).toEqual(
      ['receiver_effects', 'receiver_journal', RECEIVER_MIGRATIONS_TABLE, `${RECEIVER_MIGRATIONS_TABLE}_lock`].sort(),
    );
    expect(await knex(RECEIVER_MIGRATIONS_TABLE).pluck('name')).toEqual(['001_create_effects_and_journal']);
  });
});
