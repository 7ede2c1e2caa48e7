// The receiver store conformance suite on PostgreSQL, each test in a schema of its own; plus a
// heavier race than the suite's, since on PostgreSQL the writers really run at the same time.
import { afterEach, describe, expect, test } from 'vitest';
import type { Knex } from 'knex';
import { openPostgresEffectStore, recordEffect, type EffectStore } from '../../receiver/index.js';
import { fakeClock } from '../helpers/clock.js';
import { testSchema } from '../helpers/postgres.js';
import { effectStoreSuite, replayJournal } from './store.suite.js';

const open: Array<EffectStore<Knex.Transaction>> = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((s) => s.close()));
});

async function openStore(url: string): Promise<EffectStore<Knex.Transaction>> {
  const store = await openPostgresEffectStore({ connectionString: url });
  open.push(store);
  return store;
}

effectStoreSuite('postgres', async () => {
  const { url } = testSchema('lh_rcv');
  return { store: await openStore(url), openAnother: () => openStore(url) };
});

describe('receiver store: postgres only', () => {
  test('four pools racing on 25 jobs, first requests included: one applied per job, highest token kept', async () => {
    const { url } = testSchema('lh_rcv');
    const stores = await Promise.all([1, 2, 3, 4].map(() => openStore(url)));
    const clock = fakeClock();
    const jobs = Array.from({ length: 25 }, (_, i) => `job-${i}`);
    const attempts = jobs.flatMap((jobId) => Array.from({ length: 16 }, (_, i) => ({ jobId, qty: 3, token: 1 + ((i * 5) % 7) })));
    const outcomes = await Promise.all(
      attempts.map((attempt, i) =>
        recordEffect(stores[i % stores.length]!, attempt, clock).then((r) => ({ ...attempt, outcome: r.judgement.outcome })),
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
    expect((await recordEffect(stores[1]!, { jobId: 'job-0', qty: 3, token: 6 }, clock)).judgement.outcome).toBe('fenced');
  });
});
