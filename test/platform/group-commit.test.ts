// Group commit on a real SQLite file: concurrent writes in one process share transactions,
// each still gets its own answer, and a refused write does not undo the others.
import { afterEach, describe, expect, test } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { openSqliteQueueStore, QueueError, type Lease, type QueueStore } from '../../queue/index.js';
import { fakeClock } from '../helpers/clock.js';
import { tempDir } from '../helpers/tmp.js';
import { newJobInput } from '../queue/store.suite.js';

const stores: QueueStore[] = [];
afterEach(async () => {
  await Promise.all(stores.splice(0).map((s) => s.close()));
});

async function setup(options: { commitWindowMs?: number } = {}) {
  const clock = fakeClock();
  const filename = join(tempDir('leasehold-group-'), 'q.sqlite');
  const store = await openSqliteQueueStore({ filename, clock, ...options });
  stores.push(store);
  // SQLite's file change counter (header bytes 24-27): one more per committed write transaction.
  const commits = () => readFileSync(filename).readUInt32BE(24);
  return { store, clock, commits };
}

describe('group commit', () => {
  test('concurrent claims and finishes share commits, and every job is leased once', async () => {
    const { store, commits } = await setup();
    for (let i = 0; i < 40; i++) await store.enqueue(newJobInput({ id: `g-${i}` }));
    const before = commits();
    const leases = (await Promise.all(Array.from({ length: 40 }, (_, i) => store.claim(`w${i}`, 60_000)))) as Lease[];
    const ids = leases.map((l) => l.id);
    expect(new Set(ids).size, 'distinct jobs leased').toBe(40);
    expect(leases.every((l) => l.token === 1)).toBe(true);
    const done = await Promise.all(leases.map((l) => store.finish(l.id, l, null)));
    expect(done.every((j) => j.status === 'done')).toBe(true);
    // 80 writes; a lone writer would need 80 commits.
    expect(commits() - before, 'commits for 40 claims and 40 finishes').toBeLessThan(40);
    expect(await store.stats()).toEqual({ pending: 0, leased: 0, done: 40, dead: 0 });
  });

  test('worker loops that write again as soon as they are answered keep sharing one commit', async () => {
    // Each loop's next write comes back some promise steps after the commit that answered
    // its last one, a different number for a claim than for a finish. The committer waits
    // for all of them, so the loops do not fall into alternating batches of one and three.
    const { store, commits } = await setup();
    const loops = 4;
    const cycles = 25;
    for (let i = 0; i < loops * cycles; i++) await store.enqueue(newJobInput({ id: `l-${i}` }));
    const before = commits();
    await Promise.all(
      Array.from({ length: loops }, async (_, loop) => {
        for (let c = 0; c < cycles; c++) {
          const lease = (await store.claim(`loop-${loop}`, 60_000))!;
          await store.finish(lease.id, lease, null);
        }
      }),
    );
    const writes = 2 * loops * cycles;
    const perWrite = (commits() - before) / writes;
    // One commit for every four writes; batches of one and three would be one for every two.
    expect(perWrite, `commits per write over ${writes} writes from ${loops} loops`).toBeLessThanOrEqual(0.3);
    expect(await store.stats()).toEqual({ pending: 0, leased: 0, done: loops * cycles, dead: 0 });
  });

  test('a refused write in a batch gets its own 409 and does not undo the others', async () => {
    const { store } = await setup();
    await store.enqueue(newJobInput({ id: 'a' }));
    await store.enqueue(newJobInput({ id: 'b' }));
    const a = (await store.claim('w1', 60_000))!;
    const b = (await store.claim('w2', 60_000))!;
    const results = await Promise.allSettled([
      store.finish(a.id, a, 'ok'),
      store.finish(b.id, { owner: 'w2', token: b.token + 1 }, 'stale'),
      store.enqueue(newJobInput({ id: 'c' })),
      store.enqueue(newJobInput({ id: 'a', qty: 99 })),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'rejected']);
    expect((results[1] as PromiseRejectedResult).reason).toBeInstanceOf(QueueError);
    expect((results[1] as PromiseRejectedResult).reason.code).toBe('stale_lease');
    expect((results[3] as PromiseRejectedResult).reason.code).toBe('job_exists');
    expect((await store.get('a'))?.status).toBe('done');
    expect((await store.get('b'))?.status).toBe('leased');
    expect((await store.get('c'))?.status).toBe('pending');
  });

  test('a write that fails the transaction is retried alone, so only it sees the error', async () => {
    const { store } = await setup();
    await store.enqueue(newJobInput({ id: 'a' }));
    const a = (await store.claim('w1', 60_000))!;
    // A result that cannot be stored as JSON throws a TypeError inside the batch's transaction.
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    const results = await Promise.allSettled([
      store.enqueue(newJobInput({ id: 'b' })),
      store.finish(a.id, a, cyclic),
      store.enqueue(newJobInput({ id: 'c' })),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((results[1] as PromiseRejectedResult).reason).toBeInstanceOf(TypeError);
    expect((await store.get('a'))?.status).toBe('leased');
    expect(await store.stats()).toEqual({ pending: 2, leased: 1, done: 0, dead: 0 });
  });

  describe('commit window', () => {
    const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

    test('a lone writer never waits in the window: one transaction per write', async () => {
      const { store } = await setup({ commitWindowMs: 50 });
      for (let i = 0; i < 10; i++) await store.enqueue(newJobInput({ id: `lone-${i}` }));
      for (let i = 0; i < 10; i++) {
        const lease = (await store.claim('solo', 60_000))!;
        await store.finish(lease.id, lease, null);
        await sleep(2);
      }
      expect(store.writeStats(), 'a lone writer: as many transactions as writes').toEqual({
        transactions: 30,
        writes: 30,
      });
    });

    test('writers answered by one commit that come back at different moments share the next one', async () => {
      // Each loop comes back after its own delay, as HTTP clients do after a round trip: without
      // a window the quickest would start a transaction alone, every time.
      const { store } = await setup({ commitWindowMs: 40 });
      const loops = 4;
      const cycles = 12;
      for (let i = 0; i < loops * cycles; i++) await store.enqueue(newJobInput({ id: `w-${i}` }));
      const before = store.writeStats();
      await Promise.all(
        Array.from({ length: loops }, async (_, loop) => {
          for (let c = 0; c < cycles; c++) {
            const lease = (await store.claim(`loop-${loop}`, 60_000))!;
            await sleep(1 + 3 * loop);
            await store.finish(lease.id, lease, null);
            await sleep(1 + 3 * loop);
          }
        }),
      );
      const after = store.writeStats();
      const writes = after.writes - before.writes;
      const perWrite = (after.transactions - before.transactions) / writes;
      expect(writes).toBe(2 * loops * cycles);
      // Loops spread 10 ms apart would each commit alone (1.0); the window gathers most of them.
      expect(perWrite, `transactions per write over ${writes} writes from ${loops} loops`).toBeLessThanOrEqual(0.5);
    });
  });
});
