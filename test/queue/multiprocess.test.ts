// Several real processes on one SQLite file: claims stay exclusive and nothing is lost.
import { afterEach, describe, expect, test } from 'vitest';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openSqliteQueueStore, type Lease, type QueueStore } from '../../queue/index.js';
import { spawnLineChild, type LineChild } from '../helpers/children.js';
import { newJobInput } from './store.suite.js';
import { tempDir } from '../helpers/tmp.js';

const CLAIMER = fileURLToPath(new URL('./fixtures/claimer.mjs', import.meta.url));

const children: LineChild[] = [];
const stores: QueueStore[] = [];
afterEach(async () => {
  await Promise.all(children.splice(0).map((c) => c.stop()));
  await Promise.all(stores.splice(0).map((s) => s.close()));
});

async function setup(processes: number) {
  const filename = join(tempDir('leasehold-mp-'), 'queue.sqlite');
  const store = await openSqliteQueueStore({ filename });
  stores.push(store);
  const started = Array.from({ length: processes }, (_, i) => spawnLineChild(CLAIMER, [filename, `p${i}`]));
  children.push(...started);
  for (const child of started) await child.next();
  return { store, children: started };
}

describe('several processes on one SQLite file', () => {
  test('two processes claiming at the same moment: exactly one lease per job, every round', async () => {
    const {
      store,
      children: [a, b],
    } = await setup(2);
    const rounds = 40;
    const problems: string[] = [];
    for (let round = 0; round < rounds; round++) {
      const { job } = await store.enqueue(newJobInput({ id: `round-${round}` }));
      const at = Date.now() + 40;
      a!.send({ op: 'claim', round, at });
      b!.send({ op: 'claim', round, at });
      const answers = await Promise.all([
        a!.next<{ lease: Lease | null; error?: string }>(),
        b!.next<{ lease: Lease | null; error?: string }>(),
      ]);
      const leases = answers.map((x) => x.lease).filter((l): l is Lease => l !== null && l !== undefined);
      const errors = answers.map((x) => x.error).filter(Boolean);
      if (errors.length > 0 || leases.length !== 1 || leases[0]!.id !== job.id || leases[0]!.token !== 1) {
        problems.push(`round ${round}: ${JSON.stringify(answers)}`);
      }
      // Finish it so the next round starts with exactly one claimable job.
      if (leases[0]) await store.finish(leases[0].id, leases[0], null);
    }
    expect(problems, 'rounds where the claim was not exactly one lease of token 1').toEqual([]);
    expect(await store.stats()).toEqual({ pending: 0, leased: 0, done: rounds, dead: 0 });
  });

  test('three processes claim and finish 300 jobs: none lost, none failed, none leased twice', async () => {
    const { store, children: workers } = await setup(3);
    const total = 300;
    for (let i = 0; i < total; i++) await store.enqueue(newJobInput({ id: `job-${i}` }));
    for (const w of workers) w.send({ op: 'drain', workMs: 2 });
    const results = await Promise.all(
      workers.map((w) =>
        w.next<{ claimed: { id: string; token: number }[]; finished: number; errors: string[] }>(120_000),
      ),
    );
    const claimed = results.flatMap((r) => r.claimed);
    const ids = claimed.map((c) => c.id);
    expect(
      results.flatMap((r) => r.errors),
      'errors reported by the processes',
    ).toEqual([]);
    expect(new Set(ids).size, 'distinct jobs claimed').toBe(total);
    expect(ids.length, 'claims in all (a job leased twice would count twice)').toBe(total);
    expect(
      claimed.filter((c) => c.token !== 1),
      'claims with a token other than 1',
    ).toEqual([]);
    expect(results.reduce((n, r) => n + r.finished, 0)).toBe(total);
    expect(await store.stats()).toEqual({ pending: 0, leased: 0, done: total, dead: 0 });
    // At least two processes did part of the work, so the run really was concurrent
    // (rollback-journal locking is unfair: one process may be starved for a while).
    const busy = results.filter((r) => r.claimed.length > 0).length;
    expect(
      busy,
      `processes that claimed jobs: ${results.map((r) => r.claimed.length).join(', ')}`,
    ).toBeGreaterThanOrEqual(2);
  });
});
