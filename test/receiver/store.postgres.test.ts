// The receiver store conformance suite on PostgreSQL, each test in a schema of its own; plus a
// heavier race than the suite's, since on PostgreSQL the writers really run at the same time.
import { afterEach, describe, expect, test } from 'vitest';
import {
  openPostgresEffectStore,
  postgresEffectDialect,
  recordEffect,
  type KnexEffectStore,
} from '../../receiver/index.js';
import { fakeClock } from '../helpers/clock.js';
import type { Knex } from 'knex';
import { openPostgres, parsePostgresUrl } from '../../platform/postgres.js';
import { TEST_DATABASE_URL, testSchema } from '../helpers/postgres.js';
import { effectBatchSuite } from './store-batch.suite.js';
import { effectStoreSuite, replayJournal, type EffectStoreHarness } from './store.suite.js';

const open: KnexEffectStore[] = [];
const empty: Knex[] = [];
afterEach(async () => {
  await Promise.all([...open.splice(0).map((s) => s.close()), ...empty.splice(0).map((k) => k.destroy())]);
});

async function openStore(url: string): Promise<KnexEffectStore> {
  const store = await openPostgresEffectStore({ connectionString: url });
  open.push(store);
  return store;
}

const harness = async (): Promise<EffectStoreHarness<Knex.Transaction>> => {
  const { url } = testSchema('lh_rcv');
  const store = await openStore(url);
  return {
    store,
    openAnother: () => openStore(url),
    onStatement: (listener) => store.knex.on('query', (query: { sql: string }) => listener(query.sql)),
    emptyDatabase: async () => {
      const { schema } = testSchema('lh_rcv');
      const knex = openPostgres({ ...parsePostgresUrl(TEST_DATABASE_URL), schema });
      empty.push(knex);
      await knex.raw(`CREATE SCHEMA "${schema}"`);
      return { knex, dialect: postgresEffectDialect(10_000) };
    },
  };
};

effectStoreSuite('postgres', harness);
effectBatchSuite('postgres', harness);

describe('receiver store: postgres only', () => {
  test('four pools racing on 25 jobs, first requests included: one applied per job, highest token kept', async () => {
    const { url } = testSchema('lh_rcv');
    const stores = await Promise.all([1, 2, 3, 4].map(() => openStore(url)));
    const clock = fakeClock();
    const jobs = Array.from({ length: 25 }, (_, i) => `job-${i}`);
    const attempts = jobs.flatMap((jobId) =>
      Array.from({ length: 16 }, (_, i) => ({ jobId, qty: 3, token: 1 + ((i * 5) % 7) })),
    );
    const outcomes = await Promise.all(
      attempts.map((attempt, i) =>
        recordEffect(stores[i % stores.length]!, attempt, clock).then((r) => ({
          ...attempt,
          outcome: r.judgement.outcome,
        })),
      ),
    );
    const appliedPerJob = jobs.map((jobId) => ({
      jobId,
      applied: outcomes.filter((o) => o.jobId === jobId && o.outcome === 'applied').length,
    }));
    expect(appliedPerJob.filter((j) => j.applied !== 1)).toEqual([]);
    expect(await stores[0]!.totals()).toEqual({ effects: jobs.length, qty: 3 * jobs.length });
    const journal = await stores[3]!.journal();
    expect(journal.length).toBe(attempts.length);
    expect(replayJournal(journal).filter((row) => row.recorded !== row.replayed)).toEqual([]);
    // Every job saw token 7 (the highest sent) go through as applied or duplicate, so 6 is fenced now.
    expect((await recordEffect(stores[1]!, { jobId: 'job-0', qty: 3, token: 6 }, clock)).judgement.outcome).toBe(
      'fenced',
    );
  });

  // A refused request takes no write, so only the row lock its refused write keeps can place its
  // journal entry after the writes it saw and before those that come after: a conflict judged
  // at token 5 must not be journaled after a duplicate that raised the job to token 7.
  test('four pools racing with different quantities: every journal entry replays through the rules', async () => {
    const { url } = testSchema('lh_rcv');
    const stores = await Promise.all([1, 2, 3, 4].map(() => openStore(url)));
    const clock = fakeClock();
    const jobs = Array.from({ length: 10 }, (_, i) => `job-${i}`);
    const attempts = jobs.flatMap((jobId) =>
      Array.from({ length: 24 }, (_, i) => ({ jobId, qty: i % 3 === 2 ? 4 : 3, token: 1 + ((i * 5) % 7) })),
    );
    const outcomes = await Promise.all(
      attempts.map((attempt, i) =>
        recordEffect(stores[i % stores.length]!, attempt, clock).then((r) => ({
          ...attempt,
          outcome: r.judgement.outcome,
        })),
      ),
    );
    const appliedPerJob = jobs.map(
      (jobId) => outcomes.filter((o) => o.jobId === jobId && o.outcome === 'applied').length,
    );
    expect(appliedPerJob).toEqual(jobs.map(() => 1));
    expect(
      outcomes.some((o) => o.outcome === 'conflict'),
      'some requests met a different qty',
    ).toBe(true);
    const journal = await stores[2]!.journal();
    expect(journal.length).toBe(attempts.length);
    expect(replayJournal(journal).filter((row) => row.recorded !== row.replayed)).toEqual([]);
  });
});
