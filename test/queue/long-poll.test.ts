// Long-polling claims on real stores: a waiting claimer is answered promptly when a job is
// enqueued, in arrival order, or with nothing when its wait ends, it hangs up or the queue
// closes; on PostgreSQL, an enqueue through another process's store wakes it too.
import { afterEach, describe, expect, test } from 'vitest';
import { join } from 'node:path';
import { openPostgresQueueStore, openSqliteQueueStore, QueueError, type QueueStore } from '../../queue/index.js';
import { ClaimWaiters } from '../../queue/long-poll.js';
import { fakeClock } from '../helpers/clock.js';
import { testSchema } from '../helpers/postgres.js';
import { tempDir } from '../helpers/tmp.js';
import { newJobInput } from './store.suite.js';

const closers: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

async function sqliteStore(clock = fakeClock()): Promise<QueueStore> {
  const store = await openSqliteQueueStore({ filename: join(tempDir('leasehold-poll-'), 'q.sqlite'), clock });
  closers.push(() => store.close());
  return store;
}

function waitersOn(store: QueueStore, repollMs = 60_000): ClaimWaiters {
  const waiters = new ClaimWaiters(store, { repollMs });
  closers.push(() => waiters.close());
  return waiters;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Until `n` claims are waiting: each waits once its first look found nothing, which on a loaded
 * machine takes a while. Returns the count seen, for the caller to assert.
 */
async function waiting(waiters: ClaimWaiters, n: number): Promise<number> {
  for (const until = Date.now() + 10_000; waiters.waiting < n && Date.now() < until;) await sleep(5);
  return waiters.waiting;
}

describe('long-poll claims', () => {
  test('claims waiting beyond maxWaiters are 503 too_many_waiters at once; a claim that does not wait is never refused', async () => {
    const store = await sqliteStore();
    const waiters = new ClaimWaiters(store, { repollMs: 60_000, maxWaiters: 2 });
    closers.push(() => waiters.close());
    const first = waiters.claim('w1', 5_000, 1, 20_000);
    const second = waiters.claim('w2', 5_000, 1, 20_000);
    expect(await waiting(waiters, 2)).toBe(2);
    const refused = await waiters.claim('w3', 5_000, 1, 20_000).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(QueueError);
    expect(refused).toMatchObject({ code: 'too_many_waiters', status: 503, details: { maxWaiters: 2 } });
    expect((refused as Error).message).toMatch(/2 claims are already waiting/);
    expect(waiters.waiting).toBe(2);
    // A claim that does not wait is not held to the cap.
    expect(await waiters.claim('w4', 5_000, 1, 0)).toEqual([]);
    await store.enqueue(newJobInput({ id: 'one' }));
    expect((await first).map((l) => [l.id, l.owner])).toEqual([['one', 'w1']]);
    // A place is free again.
    const third = waiters.claim('w3', 5_000, 1, 20_000);
    expect(await waiting(waiters, 2)).toBe(2);
    await store.enqueue(newJobInput({ id: 'two' }));
    await store.enqueue(newJobInput({ id: 'three' }));
    expect((await second).map((l) => l.owner)).toEqual(['w2']);
    expect((await third).map((l) => l.owner)).toEqual(['w3']);
  });

  test('a job enqueued while a claimer waits is leased to it, without a re-poll', async () => {
    const store = await sqliteStore();
    const waiters = waitersOn(store);
    const started = performance.now();
    const claim = waiters.claim('w1', 5_000, 1, 20_000);
    expect(await waiting(waiters, 1), 'claimers waiting before the enqueue').toBe(1);
    await store.enqueue(newJobInput({ id: 'fresh' }));
    const leases = await claim;
    const ms = performance.now() - started;
    expect(leases.map((l) => [l.id, l.owner, l.token])).toEqual([['fresh', 'w1', 1]]);
    // The re-poll is a minute away: only the enqueue's signal can have woken the claim.
    expect(ms, 'ms from the claim to its answer').toBeLessThan(10_000);
  });

  test('waiters are served in the order they arrived, one job each', async () => {
    const store = await sqliteStore();
    const waiters = waitersOn(store);
    const first = waiters.claim('first', 5_000, 1, 20_000);
    expect(await waiting(waiters, 1)).toBe(1);
    const second = waiters.claim('second', 5_000, 1, 20_000);
    expect(await waiting(waiters, 2)).toBe(2);
    await store.enqueue(newJobInput({ id: 'one' }));
    expect((await first).map((l) => l.id)).toEqual(['one']);
    expect(waiters.waiting).toBe(1);
    await store.enqueue(newJobInput({ id: 'two' }));
    expect((await second).map((l) => l.id)).toEqual(['two']);
  });

  test('with max, a waiter takes what is there up to max', async () => {
    const store = await sqliteStore();
    const waiters = waitersOn(store);
    const claim = waiters.claim('w1', 5_000, 3, 20_000);
    expect(await waiting(waiters, 1)).toBe(1);
    await Promise.all([1, 2, 3, 4].map((i) => store.enqueue(newJobInput({ id: `b-${i}` }))));
    const leases = await claim;
    expect(leases.length, 'leases in the answer').toBeGreaterThanOrEqual(1);
    expect(leases.length).toBeLessThanOrEqual(3);
  });

  test('nothing is claimed when the wait ends, the caller hangs up, or the queue closes', async () => {
    const store = await sqliteStore();
    const waiters = new ClaimWaiters(store, { repollMs: 60_000 });
    expect(await waiters.claim('w1', 5_000, 1, 100)).toEqual([]);
    const controller = new AbortController();
    const aborted = waiters.claim('w2', 5_000, 1, 20_000, controller.signal);
    expect(await waiting(waiters, 1)).toBe(1);
    controller.abort();
    expect(await aborted).toEqual([]);
    const closing = waiters.claim('w3', 5_000, 1, 20_000);
    expect(await waiting(waiters, 1)).toBe(1);
    waiters.close();
    expect(await closing).toEqual([]);
    expect(waiters.waiting).toBe(0);
    await store.enqueue(newJobInput({ id: 'after' }));
    expect((await store.get('after'))?.status, 'nobody claimed after close').toBe('pending');
  });

  test('a job that becomes claimable by time alone is found by the re-poll', async () => {
    const clock = fakeClock();
    const store = await sqliteStore(clock);
    const waiters = waitersOn(store, 20);
    await store.enqueue(newJobInput({ id: 'later', runAt: clock.now() + 1_000 }));
    const claim = waiters.claim('w1', 5_000, 1, 20_000);
    expect(await waiting(waiters, 1)).toBe(1);
    clock.advance(1_000);
    expect((await claim).map((l) => l.id)).toEqual(['later']);
  });

  test('PostgreSQL: an enqueue through another store (another process) wakes the waiter', async () => {
    const { url } = testSchema();
    const a = await openPostgresQueueStore({ connectionString: url });
    closers.push(() => a.close());
    const b = await openPostgresQueueStore({ connectionString: url });
    closers.push(() => b.close());
    const waiters = waitersOn(a);
    const claim = waiters.claim('w1', 5_000, 1, 20_000);
    expect(await waiting(waiters, 1)).toBe(1);
    await b.enqueue(newJobInput({ id: 'remote' }));
    expect((await claim).map((l) => l.id)).toEqual(['remote']);
  });
});
