// The receiver store conformance suite on real SQLite files, plus SQLite-only schema checks.
import { describe, expect, test } from 'vitest';
import { openSqlite } from '../../platform/sqlite.js';
import { openSqliteEffectStore, RECEIVER_MIGRATIONS_TABLE } from '../../receiver/index.js';
import { sqliteEffectDialect } from '../../receiver/sqlite-store.js';
import { tempDir } from '../helpers/tmp.js';
import { join } from 'node:path';
import { readFileSync } from 'node:fs';
import { recordEffect } from '../../receiver/store.js';
import { closeAfterTest } from './setup.js';
import { effectBatchSuite } from './store-batch.suite.js';
import { effectStoreSuite, type EffectStoreHarness } from './store.suite.js';
import type { Knex } from 'knex';

const harness = async (): Promise<EffectStoreHarness<Knex.Transaction>> => {
  const filename = join(tempDir('leasehold-receiver-'), 'receiver.sqlite');
  const open = async () => {
    const store = await openSqliteEffectStore({ filename, busyTimeoutMs: 200 });
    closeAfterTest(() => store.close());
    return store;
  };
  const store = await open();
  return {
    store,
    openAnother: open,
    onStatement: (listener) => store.knex.on('query', (query: { sql: string }) => listener(query.sql)),
    emptyDatabase: async () => {
      const db = openSqlite({ filename: join(tempDir('leasehold-receiver-empty-'), 'empty.sqlite') });
      closeAfterTest(() => db.close());
      return { knex: db.knex, dialect: sqliteEffectDialect(db) };
    },
  };
};

effectStoreSuite('sqlite', harness);
effectBatchSuite('sqlite', harness);

describe('receiver sqlite schema', () => {
  test('migrations use receiver_ tables and their own bookkeeping table, and run again harmlessly', async () => {
    const filename = join(tempDir('leasehold-receiver-'), 'nested', 'dir', 'shared.sqlite');
    const first = await openSqliteEffectStore({ filename });
    await first.close();
    const again = await openSqliteEffectStore({ filename });
    closeAfterTest(() => again.close());

    const db = openSqlite({ filename });
    closeAfterTest(() => db.close());
    const knex = db.knex;
    const tables = (await knex('sqlite_master').where({ type: 'table' }).pluck('name')) as string[];
    expect(tables.filter((t) => t !== 'sqlite_sequence').sort()).toEqual(
      [
        'receiver_effects',
        'receiver_jobs',
        'receiver_journal',
        'receiver_totals',
        RECEIVER_MIGRATIONS_TABLE,
        `${RECEIVER_MIGRATIONS_TABLE}_lock`,
      ].sort(),
    );
    expect(await knex(RECEIVER_MIGRATIONS_TABLE).pluck('name')).toEqual([
      '001_create_effects_and_journal',
      '002_add_previous_highest_token',
      '003_index_journal_at',
      '004_job_id_256',
      '005_running_totals',
      '006_effect_keys',
    ]);
  });
});

describe('receiver sqlite group commit', () => {
  /** SQLite's file change counter: one more for every committed write transaction. */
  const changeCounter = (filename: string) => readFileSync(filename).readUInt32BE(24);

  test('concurrent effects share transactions, and racing requests for one job still give one applied', async () => {
    const filename = join(tempDir('leasehold-receiver-group-'), 'r.sqlite');
    const store = await openSqliteEffectStore({ filename });
    closeAfterTest(() => store.close());
    const clock = { now: () => 1_000 };
    const before = changeCounter(filename);
    const distinct = Array.from({ length: 40 }, (_, i) =>
      recordEffect(store, { jobId: `j${i}`, qty: 1, token: 1 }, clock),
    );
    const racing = Array.from({ length: 10 }, (_, i) =>
      recordEffect(store, { jobId: 'same', qty: 2, token: 1 + (i % 3) }, clock),
    );
    const results = await Promise.all([...distinct, ...racing]);
    const commits = changeCounter(filename) - before;
    expect(results.slice(0, 40).every((r) => r.judgement.outcome === 'applied')).toBe(true);
    expect(
      results.slice(40).filter((r) => r.judgement.outcome === 'applied').length,
      'applied for the racing job',
    ).toBe(1);
    expect(commits, 'write transactions for 50 requests').toBeLessThan(25);
    expect(await store.totals()).toEqual({ effects: 41, qty: 42 });
  });
});
