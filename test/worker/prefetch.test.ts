// `prefetch`: a worker holds up to `concurrency` + `prefetch` leases and runs at most
// `concurrency` handlers; a lease waiting for a turn is renewed like a running one, handed back
// unworked when the worker stops, and, once lost (taken over after the worker stalled, or
// cancelled), never runs its handler. Real queue, gateway and receiver on 127.0.0.1.
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, test } from 'vitest';
import {
  resolveWorkerOptions,
  runWorker,
  type WorkerEvent,
  type WorkerOptions,
  type WorkerSummary,
} from '../../worker/index.js';
import { AUTO_PREFETCH_GIVE_BACK_MS } from '../../worker/rules.js';
import { HandlerTurns } from '../../worker/turns.js';
import { queueProxy } from './proxy.js';
import { eventually, setup, timeline, type Setup } from './setup.js';

/** Leases held at each moment, from the events: claimed and not yet ended. */
function mostHeld(events: readonly WorkerEvent[]): number {
  let held = 0;
  let most = 0;
  for (const e of events) {
    if (e.event === 'claimed') most = Math.max(most, (held += 1));
    if (e.event === 'finished' || e.event === 'failed' || e.event === 'lost' || e.event === 'released') held -= 1;
  }
  return most;
}

/**
 * A worker whose first `held` handlers wait until `letGo()`; every handler sends its job's qty
 * and returns the outcome. `ran` lists the jobs whose handlers started, `most` the most handlers
 * running at once.
 */
function heldWorker(
  s: Setup,
  options: { concurrency: number; prefetch: number; held?: number } & Partial<WorkerOptions>,
) {
  const events: WorkerEvent[] = [];
  const stop = new AbortController();
  const ran: string[] = [];
  const counts = { running: 0, most: 0 };
  let letGo = () => {};
  const gate = new Promise<void>((resolve) => (letGo = resolve));
  const { held = 1, ...workerOptions } = options;
  const done = runWorker({
    queueUrl: s.queue.url,
    gatewayUrl: s.gateway.url,
    name: 'w1',
    leaseMs: 1_500,
    ...workerOptions,
    signal: stop.signal,
    onEvent: (e) => events.push(e),
    handler: async (ctx) => {
      ran.push(ctx.lease.id);
      counts.most = Math.max(counts.most, (counts.running += 1));
      try {
        if (ran.length <= held) await gate;
        return (await ctx.send()).outcome;
      } finally {
        counts.running -= 1;
      }
    },
  });
  const claimed = () => events.flatMap((e) => (e.event === 'claimed' ? [e.job] : []));
  const saw = (event: WorkerEvent['event'], job: string) =>
    events.some((e) => e.event === event && 'job' in e && e.job === job);
  return { events, stop, ran, counts, letGo, done, claimed, saw };
}

describe('prefetch', () => {
  test('concurrency 1, prefetch 2: one handler at a time, up to 3 leases held, every job finished and sent once', async () => {
    const s = await setup();
    const ids = Array.from({ length: 9 }, (_, i) => `job-${i + 1}`);
    for (const id of ids) await s.client.enqueue({ id, qty: 1 });
    const events: WorkerEvent[] = [];
    let running = 0;
    let most = 0;
    const stop = new AbortController();

    const done = runWorker({
      queueUrl: s.queue.url,
      gatewayUrl: s.gateway.url,
      name: 'w1',
      leaseMs: 3_000,
      concurrency: 1,
      prefetch: 2,
      signal: stop.signal,
      onEvent: (e) => events.push(e),
      handler: async (ctx) => {
        most = Math.max(most, (running += 1));
        try {
          await sleep(60);
          return (await ctx.send()).outcome;
        } finally {
          running -= 1;
        }
      },
    });
    await eventually('all jobs done', async () => ((await s.client.stats()).done === 9 ? true : undefined), 30_000);
    stop.abort();
    const summary = await done;

    expect(most, 'handlers running at once').toBe(1);
    expect(mostHeld(events), 'leases held at once').toBe(3);
    expect(summary).toEqual({ claimed: 9, finished: 9, failed: 0, lost: 0, released: 0 });
    expect(events[0]).toMatchObject({ event: 'started', concurrency: 1, prefetch: 2 });
    // A lease that waited says when it starts: between its claim and its send.
    const turns = events.filter((e) => e.event === 'turn');
    expect(turns.length, 'leases that waited for a turn').toBeGreaterThanOrEqual(2);
    for (const turn of turns) {
      expect(turn, 'a turn event').toMatchObject({ waitedMs: expect.any(Number) as number });
      const steps = timeline(events, 'job' in turn ? turn.job : '').filter((name) => name !== 'renewed');
      expect(steps).toEqual(['claimed', 'turn', 'sent', 'finished']);
    }
    for (const id of ids) {
      expect(await s.client.get(id), id).toMatchObject({ status: 'done', attempts: 1, token: 1, result: 'applied' });
    }
    await expectAppliedOnce(s, ids);
  });

  test('a stop hands back the leases waiting for a turn, unworked and at once; the running handler ends within the grace', async () => {
    const s = await setup();
    for (const id of ['a', 'b', 'c']) await s.client.enqueue({ id, qty: 1 });
    const w = heldWorker(s, { concurrency: 1, prefetch: 2, leaseMs: 3_000, graceMs: 20_000 });
    await eventually('three leases held, one handler running', () =>
      w.claimed().length === 3 && w.ran.length === 1 ? true : undefined,
    );
    const first = w.ran[0]!;
    const waiting = ['a', 'b', 'c'].filter((id) => id !== first);
    w.stop.abort();
    // Handed back before the running handler ends: claimable by another worker while it runs.
    await eventually('the waiting leases released', () =>
      w.events.filter((e) => e.event === 'released').length === 2 ? true : undefined,
    );
    for (const id of waiting) {
      expect(await s.client.get(id), id).toMatchObject({ status: 'pending', attempts: 0, token: 1 });
    }
    w.letGo();
    const summary = await w.done;

    expect(w.ran, 'handlers that ran').toEqual([first]);
    expect(summary).toEqual({ claimed: 3, finished: 1, failed: 0, lost: 0, released: 2 });
    expect(await s.client.get(first)).toMatchObject({ status: 'done', result: 'applied' });
    expect(w.events.flatMap((e) => (e.event === 'released' ? [e.job] : [])).sort()).toEqual(waiting);
    for (const id of waiting) expect(timeline(w.events, id), id).toEqual(['claimed', 'released']);
  });

  test('a waiting lease is renewed while it waits, and its job runs under the token it was claimed with', async () => {
    const s = await setup();
    for (const id of ['a', 'b']) await s.client.enqueue({ id, qty: 1 });
    const events: WorkerEvent[] = [];
    const stop = new AbortController();
    const ran: Array<{ id: string; token: number }> = [];

    const done = runWorker({
      queueUrl: s.queue.url,
      gatewayUrl: s.gateway.url,
      name: 'w1',
      // Renewed every 500 ms; the first handler runs 3 s, six times longer than that.
      leaseMs: 1_500,
      concurrency: 1,
      prefetch: 1,
      signal: stop.signal,
      onEvent: (e) => events.push(e),
      handler: async (ctx) => {
        ran.push({ id: ctx.lease.id, token: ctx.lease.token });
        if (ran.length === 1) await sleep(3_000);
        return (await ctx.send()).outcome;
      },
    });
    await eventually('both jobs done', async () => ((await s.client.stats()).done === 2 ? true : undefined), 30_000);
    stop.abort();
    await done;

    const second = ran[1]!;
    const startedAt = events.find((e) => e.event === 'sent' && e.job === second.id)!.t;
    const renewalsWhileWaiting = events.filter((e) => e.event === 'renewed' && e.job === second.id && e.t < startedAt);
    expect(renewalsWhileWaiting.length, `renewals of ${second.id} before its handler ran`).toBeGreaterThanOrEqual(2);
    expect(ran.map((r) => r.token)).toEqual([1, 1]);
    expect(timeline(events, second.id).filter((name) => name === 'lost' || name === 'refused:renew')).toEqual([]);
    expect(await s.client.get(second.id)).toMatchObject({ status: 'done', attempts: 1, token: 1, result: 'applied' });
  });

  test('leases taken over after their worker stalled: the waiting one never runs its handler, the running one sends nothing', async () => {
    const s = await setup();
    for (const id of ['a', 'b']) await s.client.enqueue({ id, qty: 1 });
    const w = heldWorker(s, { concurrency: 1, prefetch: 1 });
    await eventually('both leases held', () => (w.claimed().length === 2 && w.ran.length === 1 ? true : undefined));
    const running = w.ran[0]!;
    const waiting = running === 'a' ? 'b' : 'a';
    // The worker's view stands still while the queue's clock passes both leases: another owner
    // takes both jobs over, under token 2.
    s.advanceQueueClock(60_000);
    const thief = await s.client.claimMany('thief', { max: 2, leaseMs: 120_000 });
    expect(thief.map((lease) => [lease.id, lease.token]).sort()).toEqual([
      ['a', 2],
      ['b', 2],
    ]);
    await eventually(`the waiting lease of ${waiting} lost`, () => (w.saw('lost', waiting) ? true : undefined));
    w.letGo();
    await eventually(`the running lease of ${running} lost`, () => (w.saw('lost', running) ? true : undefined));
    w.stop.abort();
    const summary = await w.done;

    expect(w.ran, 'handlers that ran').toEqual([running]);
    expect(summary).toMatchObject({ claimed: 2, finished: 0, lost: 2 });
    for (const id of ['a', 'b']) {
      expect(await s.client.get(id), id).toMatchObject({ status: 'leased', owner: 'thief', token: 2 });
    }
    expect(await s.receiver.journal(), 'effects recorded').toEqual([]);
  });

  test('a job cancelled while its lease waits: lost as cancelled, its handler never runs, its slot free at once', async () => {
    const s = await setup();
    for (const id of ['a', 'b']) await s.client.enqueue({ id, qty: 1 });
    const w = heldWorker(s, { concurrency: 1, prefetch: 1 });
    await eventually('both leases held', () => (w.claimed().length === 2 && w.ran.length === 1 ? true : undefined));
    const first = w.ran[0]!;
    const waiting = first === 'a' ? 'b' : 'a';
    await s.client.cancel(waiting);
    await eventually(`the waiting lease of ${waiting} lost`, () => (w.saw('lost', waiting) ? true : undefined));
    // Its slot is free at once, while the first handler still runs: a new job is claimed into it.
    await s.client.enqueue({ id: 'c', qty: 1 });
    await eventually('c claimed while the first handler still runs', () => (w.saw('claimed', 'c') ? true : undefined));
    expect(w.ran, 'handlers started before the first one ended').toEqual([first]);
    w.letGo();
    await eventually('the first job and c done', async () =>
      (await s.client.get(first)).status === 'done' && (await s.client.get('c')).status === 'done' ? true : undefined,
    );
    w.stop.abort();
    await w.done;

    expect(w.ran, 'handlers that ran').toEqual([first, 'c']);
    expect(w.events.find((e) => e.event === 'lost' && e.job === waiting)).toMatchObject({ reason: 'cancelled' });
    expect(await s.client.get(waiting)).toMatchObject({ status: 'dead', deadReason: 'cancelled' });
  });

  test('a batch of finishes whose answer is cut and a job cancelled among the held ones: every other job done and sent once, nothing under the lost lease', async () => {
    const s = await setup();
    const proxy = await queueProxy(s.queue.url);
    const ids = Array.from({ length: 12 }, (_, i) => `job-${String(i + 1).padStart(2, '0')}`);
    for (const id of ids) await s.client.enqueue({ id, qty: 1 });
    // Renewed every 500 ms; a next lease lost with the cut answer is claimable again 1.5 s on.
    const w = heldWorker(s, { concurrency: 2, prefetch: 4, held: 2, queueUrl: proxy.url, pollMs: 50 });
    await eventually('six leases held, two handlers held', () =>
      w.claimed().length === 6 && w.ran.length === 2 ? true : undefined,
    );
    const waiting = w.claimed().filter((id) => !w.ran.includes(id));
    // One waiting job is cancelled, just as the held handlers are let go.
    const cancelled = waiting[0]!;
    await s.client.cancel(cancelled);
    const cut = proxy.cutAnswer('POST /finishes');
    w.letGo();
    await cut;
    await eventually(
      'every other job done',
      async () => ((await s.client.stats()).done === ids.length - 1 ? true : undefined),
      30_000,
    );
    w.stop.abort();
    const summary = await w.done;

    expect(w.counts.most, 'handlers running at once').toBeLessThanOrEqual(2);
    // Its handler may have had its turn before a renewal told the worker of the cancel; if it
    // did, its send was refused. Either way the lease ends lost and sends nothing.
    expect(timeline(w.events, cancelled).filter((name) => name === 'sent' || name === 'finished')).toEqual([]);
    expect(w.events.find((e) => e.event === 'lost' && e.job === cancelled)).toMatchObject({ reason: 'cancelled' });
    expect(summary.lost).toBe(1);
    expect(
      w.events.some((e) => e.event === 'call_failed' && e.op === 'finish'),
      'a finish sent again after the cut answer',
    ).toBe(true);
    for (const id of ids.filter((id) => id !== cancelled)) {
      expect(await s.client.get(id), id).toMatchObject({ status: 'done', owner: 'w1', result: 'applied' });
    }
    expect(await s.client.get(cancelled)).toMatchObject({ status: 'dead', deadReason: 'cancelled' });
    // Each done job's effect recorded once, none for the lost one.
    const journal = await s.receiver.journal();
    const applied = journal.filter((entry) => entry.outcome === 'applied').map((entry) => entry.jobId);
    expect(applied.sort()).toEqual(ids.filter((id) => id !== cancelled).sort());
    expect(proxy.batches.length, 'POST /finishes requests').toBeGreaterThanOrEqual(1);
  });

  test("prefetch is 'auto' (the default) or a whole number, and concurrency + prefetch at most 100 (one claim)", () => {
    const base = { queueUrl: 'http://127.0.0.1:1', gatewayUrl: 'http://127.0.0.1:2', name: 'w1' };
    expect(resolveWorkerOptions(base).prefetch).toBe('auto');
    expect(resolveWorkerOptions({ ...base, prefetch: 0 }).prefetch).toBe(0);
    expect(resolveWorkerOptions({ ...base, concurrency: 90, prefetch: 10 }).prefetch).toBe(10);
    expect(() => resolveWorkerOptions({ ...base, prefetch: -1 })).toThrow(
      "prefetch must be 'auto' or an integer from 0 to 99, not -1.",
    );
    expect(() => resolveWorkerOptions({ ...base, prefetch: 1.5 })).toThrow(
      "prefetch must be 'auto' or an integer from 0 to 99, not 1.5.",
    );
    expect(() => resolveWorkerOptions({ ...base, concurrency: 90, prefetch: 11 })).toThrow(
      "prefetch must be 'auto' or an integer from 0 to 10, not 11.",
    );
    expect(() => resolveWorkerOptions({ ...base, prefetch: 'Auto' as 'auto' })).toThrow(
      `prefetch must be 'auto' or an integer from 0 to 99, not "Auto".`,
    );
  });
});

/** Enqueues `n` jobs of qty 1, `prefix-01`, `prefix-02`…, in that order (the order they are claimed in). */
async function enqueueJobs(s: Setup, prefix: string, n: number): Promise<string[]> {
  const ids = Array.from({ length: n }, (_, i) => `${prefix}-${String(i + 1).padStart(2, '0')}`);
  for (const id of ids) await s.client.enqueue({ id, qty: 1 });
  return ids;
}

/** Waits until `n` jobs are done, then stops the worker's run and returns its summary. */
async function doneThenStop(s: Setup, n: number, w: { stop: AbortController; done: Promise<WorkerSummary> }) {
  await eventually('all jobs done', async () => ((await s.client.stats()).done === n ? true : undefined), 30_000);
  w.stop.abort();
  return w.done;
}

/** The receiver recorded the effects of exactly `ids`, each applied once. */
async function expectAppliedOnce(s: Setup, ids: Iterable<string>): Promise<void> {
  const journal = await s.receiver.journal();
  expect(journal.map((entry) => entry.jobId).sort(), 'jobs with an effect').toEqual([...ids].sort());
  expect(new Set(journal.map((entry) => entry.outcome))).toEqual(new Set(['applied']));
}

/**
 * A worker with the default prefetch ('auto') whose clock (its `now` only: its timers are
 * Node's) moves `stepMs(job)` at each handler's start, so the time it measures each handler to
 * take is the test's: `stepMs`, plus the steps of the handlers that started while it ran. Every
 * handler sends its job's qty.
 */
function pacedWorker(
  s: Setup,
  concurrency: number,
  stepMs: (job: string) => number,
  options: { leaseMs?: number; holdFrom?: number } = {},
) {
  const events: WorkerEvent[] = [];
  const stop = new AbortController();
  let now = Date.now();
  let running = 0;
  const counts = { most: 0 };
  const ran: string[] = [];
  let letGo = () => {};
  const gate = new Promise<void>((resolve) => (letGo = resolve));
  const done = runWorker({
    queueUrl: s.queue.url,
    gatewayUrl: s.gateway.url,
    name: 'w1',
    leaseMs: options.leaseMs ?? 600_000,
    concurrency,
    clock: { now: () => now },
    signal: stop.signal,
    onEvent: (e) => events.push(e),
    handler: async (ctx) => {
      now += stepMs(ctx.lease.id);
      ran.push(ctx.lease.id);
      counts.most = Math.max(counts.most, (running += 1));
      try {
        // From the `holdFrom`-th job on, handlers wait for letGo() before they send.
        if (options.holdFrom !== undefined && ran.length >= options.holdFrom) await gate;
        return (await ctx.send()).outcome;
      } finally {
        running -= 1;
      }
    },
  });
  const saw = (event: WorkerEvent['event'], job: string) =>
    events.some((e) => e.event === event && 'job' in e && e.job === job);
  return { events, stop, counts, done, ran, letGo, saw };
}

describe("prefetch 'auto'", () => {
  test("short jobs: leases held ahead as the handlers' time asks, one handler per turn, every job done and sent once", async () => {
    const s = await setup();
    const ids = await enqueueJobs(s, 'job', 60);
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(`${warning.name}: ${warning.message}`);
    process.on('warning', onWarning);
    // Handlers of 1 to 2 ms (the other one's step may land while one runs): 2 x 20 ms over
    // that, 20 to 40 leases held ahead (rules.autoPrefetch), once 4 turns are known.
    const w = pacedWorker(s, 2, () => 1);
    const summary = await doneThenStop(s, 60, w);
    process.off('warning', onWarning);
    // More than 10 leases waiting on the run's signals is by design, not a listener leak.
    expect(warnings, 'process warnings').toEqual([]);

    expect(w.events[0]).toMatchObject({ event: 'started', concurrency: 2, prefetch: 'auto' });
    expect(w.counts.most, 'handlers running at once').toBe(2);
    // Held ahead: more leases than handlers, never more than 2 + 40.
    const held = mostHeld(w.events);
    expect(held, 'leases held at once').toBeGreaterThan(2);
    expect(held, 'leases held at once').toBeLessThanOrEqual(42);
    expect(w.events.filter((e) => e.event === 'turn').length, 'leases that waited for a turn').toBeGreaterThan(0);
    expect(summary).toEqual({ claimed: 60, finished: 60, failed: 0, lost: 0, released: 0 });
    await expectAppliedOnce(s, ids);
  });

  test('handlers far under a millisecond, each read as 0 ms while the clock moves: leases held ahead all the same', async () => {
    const s = await setup();
    await enqueueJobs(s, 'quick', 80);
    const events: WorkerEvent[] = [];
    const stop = new AbortController();
    // The worker's clock moves a millisecond at each finish answered: never while a handler runs,
    // as a real clock of whole milliseconds seldom does for a handler that returns at once.
    let now = Date.now();
    const done = runWorker({
      queueUrl: s.queue.url,
      gatewayUrl: s.gateway.url,
      name: 'w1',
      concurrency: 2,
      clock: { now: () => now },
      signal: stop.signal,
      onEvent: (e) => {
        events.push(e);
        if (e.event === 'finished') now += 1;
      },
      handler: async () => 'ok',
    });
    expect(await doneThenStop(s, 80, { stop, done })).toEqual({
      claimed: 80,
      finished: 80,
      failed: 0,
      lost: 0,
      released: 0,
    });
    expect(mostHeld(events), 'leases held at once').toBeGreaterThan(2);
    expect(events.filter((e) => e.event === 'turn').length, 'leases that waited for a turn').toBeGreaterThan(0);
  });

  test('long jobs: no lease held beyond concurrency; and once jobs grow long, the leases held ahead run down', async () => {
    const s = await setup();
    await enqueueJobs(s, 'long', 12);
    // Handlers of a second hold none.
    const w = pacedWorker(s, 2, () => 1_000);
    expect(await doneThenStop(s, 12, w)).toEqual({ claimed: 12, finished: 12, failed: 0, lost: 0, released: 0 });
    expect(mostHeld(w.events), 'leases held at once').toBe(2);
    expect(
      w.events.filter((e) => e.event === 'turn'),
      'leases that waited for a turn',
    ).toEqual([]);

    // Short jobs first, then long ones: what was held ahead is worked off, and no more is held.
    const s2 = await setup();
    await enqueueJobs(s2, 'short', 40);
    // More long jobs than the 40 at most held ahead while the jobs are short.
    const longer = await enqueueJobs(s2, 'long', 50);
    const w2 = pacedWorker(s2, 2, (job) => (job.startsWith('short') ? 1 : 1_000));
    expect(await doneThenStop(s2, 90, w2)).toEqual({ claimed: 90, finished: 90, failed: 0, lost: 0, released: 0 });
    expect(mostHeld(w2.events), 'leases held at once').toBeGreaterThan(2);
    // Once a long job starts, none is held: once the leases held ahead are worked off,
    // the last long jobs are claimed as handlers free up, each starting at once (no turn waited for).
    const waited = new Set(w2.events.flatMap((e) => (e.event === 'turn' ? [e.job] : [])));
    expect(waited.has('long-01'), 'the first long job was held ahead and waited').toBe(true);
    expect(
      longer.slice(-5).filter((id) => waited.has(id)),
      'long jobs that waited for a turn',
    ).toEqual([]);
  });

  test('a job far longer than the ones before: the leases held ahead behind it are handed back after a second, attempts given back, and every job runs once', async () => {
    const s = await setup();
    const ids = await enqueueJobs(s, 'job', 30);
    // Handlers of 1 ms (20 leases ahead), then the 11th job's handler hangs until letGo().
    const w = pacedWorker(s, 1, () => 1, { holdFrom: 11 });
    const handedBack = () => w.events.flatMap((e) => (e.event === 'released' && e.waitedMs !== undefined ? [e] : []));
    await eventually('leases held ahead handed back', () => (handedBack().length >= 1 ? true : undefined), 10_000);
    const stuck = w.ran[10]!;
    w.letGo();
    const summary = await doneThenStop(s, 30, w);

    for (const e of handedBack()) {
      expect(e, 'a lease handed back after waiting').toMatchObject({ waitedMs: AUTO_PREFETCH_GIVE_BACK_MS });
      expect(e.job, 'the hung job is not handed back').not.toBe(stuck);
    }
    expect(summary).toMatchObject({ finished: 30, released: handedBack().length, lost: 0, failed: 0 });
    // Each handed back with its attempt given back: claimed again later, done on its first attempt.
    for (const id of ids) {
      expect(await s.client.get(id), id).toMatchObject({ status: 'done', attempts: 1, result: 'applied' });
    }
    await expectAppliedOnce(s, ids);
  });

  test('a stalled worker whose leases held ahead are taken over: the waiting ones never run, the running ones send nothing, every other job once', async () => {
    const s = await setup();
    await enqueueJobs(s, 'job', 40);
    // Handlers of 1 to 2 ms (20 to 40 leases ahead), then from the 11th job on both handlers hang before their send.
    const w = pacedWorker(s, 2, () => 1, { leaseMs: 1_500, holdFrom: 11 });
    const heldNow = () => {
      const ended = new Set(w.events.flatMap((e) => (e.event === 'finished' || e.event === 'lost' ? [e.job] : [])));
      return w.events.flatMap((e) => (e.event === 'claimed' && !ended.has(e.job) ? [e.job] : []));
    };
    const finishedJobs = () => new Set(w.events.flatMap((e) => (e.event === 'finished' ? [e.job] : [])));
    // The first ten finished (their finishes answered), two handlers stuck, leases held ahead.
    await eventually('two handlers stuck, ten jobs finished, leases held ahead', () =>
      w.ran.length === 12 && finishedJobs().size === 10 && heldNow().length > 2 ? true : undefined,
    );
    const stuck = w.ran.slice(10);
    const finished = finishedJobs();
    // The queue's clock passes every lease: another owner takes the held jobs over, under token 2.
    s.advanceQueueClock(60_000);
    const thief = await s.client.claimMany('thief', { max: 100, leaseMs: 600_000 });
    const taken = new Set(thief.map((lease) => lease.id));
    // Every lease w1 holds, a claim answered late included, is found lost by its renewals.
    await eventually('every lease held by w1 lost', () => (heldNow().length === 0 ? true : undefined));
    w.letGo();
    w.stop.abort();
    const summary = await w.done;

    const claimed = w.events.flatMap((e) => (e.event === 'claimed' ? [e.job] : []));
    const held = claimed.filter((id) => !finished.has(id));
    expect(held.length, 'leases held beyond the two stuck handlers').toBeGreaterThan(2);
    expect(w.ran.slice(10), 'handlers that ran after the stall').toEqual(stuck);
    expect(summary).toMatchObject({ finished: 10, lost: held.length });
    for (const id of held.filter((id) => !stuck.includes(id))) {
      expect(w.saw('turn', id), `${id}, held ahead, got a turn`).toBe(false);
    }
    for (const id of held) {
      expect(taken.has(id), `${id} taken over`).toBe(true);
      expect(await s.client.get(id), id).toMatchObject({ status: 'leased', owner: 'thief', token: 2 });
    }
    // Effects: exactly the jobs w1 finished, once each; nothing under a lost lease.
    await expectAppliedOnce(s, finished);
  });
});

describe('HandlerTurns', () => {
  test('turns go first come, first served; a turn given back twice counts once', async () => {
    const turns = new HandlerTurns(1);
    const order: string[] = [];
    const first = (await turns.take(undefined))!;
    const second = turns.take(undefined).then((turn) => (order.push('second'), turn!));
    const third = turns.take(undefined).then((turn) => (order.push('third'), turn!));
    await sleep(5);
    expect(order).toEqual([]);
    first();
    first();
    const secondTurn = await second;
    await sleep(5);
    expect(order, 'a second give-back of the same turn must not start another').toEqual(['second']);
    secondTurn();
    (await third)();
    expect(order).toEqual(['second', 'third']);
    // All given back: the one turn is free again.
    expect(await turns.take(undefined)).toBeTypeOf('function');
  });

  test('a wait that is aborted gets no turn and leaves the line', async () => {
    const turns = new HandlerTurns(1);
    const first = (await turns.take(undefined))!;
    const stop = new AbortController();
    const aborted = turns.take(stop.signal);
    const after = turns.take(undefined);
    stop.abort();
    expect(await aborted).toBeUndefined();
    first();
    expect(await after).toBeTypeOf('function');
    expect(await turns.take(AbortSignal.abort())).toBeUndefined();
  });

  test('either of two signals cuts the wait: the run stopping, or the lease lost', async () => {
    const turns = new HandlerTurns(1);
    const first = (await turns.take(undefined))!;
    const stop = new AbortController();
    const lost = [new AbortController(), new AbortController()];
    const waits = [turns.take(stop.signal, lost[0]!.signal), turns.take(stop.signal, lost[1]!.signal)];
    lost[0]!.abort();
    expect(await waits[0], 'the wait whose lease was lost').toBeUndefined();
    expect(await Promise.race([waits[1], sleep(20).then(() => 'still waiting')])).toBe('still waiting');
    stop.abort();
    expect(await waits[1], 'the wait when the run stopped').toBeUndefined();
    first();
    expect(await turns.take(undefined, undefined), 'the turn given back and free').toBeTypeOf('function');
  });
});
