// The zombie through the kit: a worker held after its last look at its lease, the lease run out
// by the manual clock, a second worker takes the job over, the first wakes and is fenced.
import { expect, test } from 'vitest';
import { hold, startSystem } from '../../testing/index.js';
import type { JobContext, WorkerEvent } from '../../worker/index.js';
import { testSchema } from '../helpers/postgres.js';

async function ship(ctx: JobContext) {
  await ctx.send();
  return { shipped: ctx.lease.qty };
}

test('a worker stalled past its lease is fenced at the gateway: one effect', async () => {
  const system = await startSystem({ clock: 'manual' });
  try {
    await system.queue.enqueue({ id: 'order-1', qty: 2 });
    const stall = hold();
    const events: WorkerEvent[] = [];
    const a = system.worker('a', { hooks: { beforeSend: stall.wait }, onEvent: (e) => events.push(e) });
    const first = a.claim().then((claimed) => a.process(claimed!, ship));
    await stall.arrived;
    system.clock.advance(30_000);
    const b = system.worker('b');
    const second = await b.process((await b.claim())!, ship);
    expect(second.status).toBe('finished');
    stall.release();
    const late = await first;
    expect(late.status).toBe('lost');
    expect(events.filter((e) => e.event === 'refused' && e.op === 'send')).toMatchObject([{ code: 'stale_lease' }]);
    expect(await system.stub.journal()).toMatchObject([{ jobId: 'order-1', token: 2, outcome: 'applied' }]);
    await system.expectExactlyOnce();
  } finally {
    await system.close();
  }
});

// On PostgreSQL the stalled worker's renewal, fired by the jump, holds the job's row for a moment
// while the second worker's claim runs: the claim must take the job at that instant all the same.
test('on PostgreSQL, the zombie again and again in one system: the second claim takes the job each time', async () => {
  const system = await startSystem({ clock: 'manual', db: testSchema('lh_kit').url });
  try {
    const claimed: Array<number | null> = [];
    for (let round = 0; round < 10; round++) {
      await system.reset();
      await system.queue.enqueue({ id: 'order-1', qty: 2 });
      const stall = hold();
      const a = system.worker(`a${round}`, { hooks: { beforeSend: stall.wait } });
      const first = a.claim().then((lease) => a.process(lease!, ship));
      await stall.arrived;
      system.clock.advance(30_000);
      const b = system.worker(`b${round}`);
      const lease = await b.claim();
      claimed.push(lease?.lease.token ?? null);
      if (lease) await b.process(lease, ship);
      stall.release();
      await first;
    }
    expect(claimed, 'the token of the second claim in each round (null: it took nothing)').toEqual(Array(10).fill(2));
  } finally {
    await system.close();
  }
});

test('prefetch under the manual clock: a waiting lease is renewed as the clock moves, and runs under its first token', async () => {
  const system = await startSystem({ clock: 'manual' });
  try {
    for (const id of ['order-1', 'order-2']) await system.queue.enqueue({ id, qty: 1 });
    const events: WorkerEvent[] = [];
    const first = hold();
    const ran: Array<[string, number]> = [];
    const stop = new AbortController();
    // Renewed every 1000 ms of the system's clock.
    const w = system.worker('w', { concurrency: 1, prefetch: 1, leaseMs: 3_000, onEvent: (e) => events.push(e) });
    const running = w.run(
      async (ctx) => {
        ran.push([ctx.lease.id, ctx.lease.token]);
        if (ran.length === 1) await first.wait();
        return ship(ctx);
      },
      { signal: stop.signal },
    );
    await first.arrived;
    const waiting = ran[0]![0] === 'order-1' ? 'order-2' : 'order-1';
    const renewalsOf = (id: string) => events.filter((e) => e.event === 'renewed' && e.job === id).length;
    // 10 s of the system's clock, three leases' worth, in steps shorter than the renewal interval.
    for (let step = 1; step <= 20; step++) {
      system.clock.advance(500);
      if (step % 2 === 0) await until(() => renewalsOf(waiting) >= step / 2, `renewal ${step / 2} of ${waiting}`);
    }
    expect(ran, 'handlers started while the first one is held').toEqual([ran[0]]);
    first.release();
    await until(() => ran.length === 2 && events.some((e) => e.event === 'finished' && e.job === waiting), 'both done');
    stop.abort();
    await running;
    expect(ran[1]).toEqual([waiting, 1]);
    await system.expectExactlyOnce();
  } finally {
    await system.close();
  }
});

// A test that fails between `stall.arrived` and `stall.release()` leaves its worker held in the
// hook: the kit's close() in its afterAll must still return, not wait for a release that never comes.
test('a zombie test that fails before its release(): close() returns at once, the held send never made', async () => {
  const system = await startSystem({ clock: 'manual' });
  let closing: Promise<void> | undefined;
  try {
    await system.queue.enqueue({ id: 'order-1', qty: 2 });
    const stall = hold();
    const a = system.worker('a', { hooks: { beforeSend: stall.wait } });
    const first = a.claim().then((claimed) => a.process(claimed!, ship));
    await stall.arrived;
    system.clock.advance(30_000);
    const b = system.worker('b');
    expect((await b.process((await b.claim())!, ship)).status).toBe('finished');
    // ...the test fails here, before stall.release(): what runs next is its afterAll.
    closing = system.close();
    const closed = await within(closing, 5_000);
    expect(closed, "close() with a's send still held (the worker's graceMs is 10 s)").toBe(true);
    expect(await first, 'the held worker, whose lease had run out').toMatchObject({ status: 'lost' });
  } finally {
    // Bounded, so that a close() that never returns fails this test instead of hanging the file.
    await within(closing ?? system.close(), 5_000);
  }
});

test.each(['beforeSend', 'beforeFinish'] as const)(
  'a worker held in %s by hold() when it is closed: the hold ends, the lease is released at once',
  async (hook) => {
    const system = await startSystem({ clock: 'manual' });
    try {
      await system.queue.enqueue({ id: 'order-1', qty: 2 });
      const stall = hold();
      const a = system.worker('a', { hooks: { [hook]: stall.wait } });
      const held = a.claim().then((claimed) => a.process(claimed!, ship));
      await stall.arrived;
      const started = Date.now();
      expect(await within(a.close(), 5_000), 'close() returned (its graceMs is 10 s)').toBe(true);
      expect(Date.now() - started, 'ms close() took').toBeLessThan(5_000);
      expect(await held).toMatchObject({ status: 'released' });
      // Back to pending at once, its attempt given back; the held send never left.
      expect(await system.queue.get('order-1')).toMatchObject({ status: 'pending', attempts: 0, owner: null });
      expect(await system.stub.journal()).toHaveLength(hook === 'beforeSend' ? 0 : 1);
    } finally {
      await within(system.close(), 5_000);
    }
  },
);

/** True when `promise` settles within `ms` of real time, false otherwise. */
async function within(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  try {
    return await Promise.race([promise.then(() => true as const), late]);
  } finally {
    clearTimeout(timer);
  }
}

/** Polls `check` in real time until it holds; fails naming `what` after 10 s. */
async function until(check: () => boolean, what: string): Promise<void> {
  const end = Date.now() + 10_000;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
