// Several jobs per worker against the real services: never more than `concurrency` at once,
// every job finished once, free slots filled by one long-polled claim and a finished job's slot
// refilled by its own finish; an idle worker picks a new job up as soon as it is enqueued.
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, test } from 'vitest';
import { runWorker, type QueueApi, type WorkerEvent } from '../../worker/index.js';
import { eventually, setup, type Setup } from './setup.js';

/** The queue calls a worker makes, counted by name; `finishManyWithNext` counts the finishes such calls carried. */
function counted(s: Setup): { queue: QueueApi; calls: Record<string, number> } {
  const calls: Record<string, number> = {};
  const count = <A extends unknown[], R>(name: string, call: (...args: A) => R) => {
    return (...args: A): R => {
      calls[name] = (calls[name] ?? 0) + 1;
      return call(...args);
    };
  };
  const plain = s.queueApi({
    finishMany: (owner, finishes, options) => {
      if (options?.next) calls.finishManyWithNext = (calls.finishManyWithNext ?? 0) + finishes.length;
      return s.client.finishMany(owner, finishes, options);
    },
  });
  const queue = Object.fromEntries(
    Object.entries(plain).map(([name, call]) => [name, count(name, call as (...args: unknown[]) => unknown)]),
  ) as unknown as QueueApi;
  return { queue, calls };
}

describe('concurrency', () => {
  test('12 jobs with concurrency 4: all finished once, at most 4 in flight, each next job brought back by a finish', async () => {
    const s = await setup();
    const ids = Array.from({ length: 12 }, (_, i) => `job-${String(i + 1).padStart(2, '0')}`);
    for (const id of ids) await s.client.enqueue({ id, qty: 1 });
    const { queue, calls } = counted(s);
    const events: WorkerEvent[] = [];
    let inFlight = 0;
    let most = 0;
    const stop = new AbortController();

    const running = runWorker({
      queueUrl: s.queue.url,
      gatewayUrl: s.gateway.url,
      name: 'w1',
      leaseMs: 3_000,
      concurrency: 4,
      queue,
      signal: stop.signal,
      onEvent: (e) => events.push(e),
      handler: async (ctx) => {
        most = Math.max(most, (inFlight += 1));
        try {
          await sleep(150);
          return (await ctx.send()).outcome;
        } finally {
          inFlight -= 1;
        }
      },
    });
    await eventually('all jobs done', async () => ((await s.client.stats()).done === 12 ? true : undefined), 30_000);
    stop.abort();

    await expect(running).resolves.toEqual({ claimed: 12, finished: 12, failed: 0, lost: 0, released: 0 });
    expect(most).toBe(4);
    // Every job once, under its first token: nothing was claimed twice.
    for (const id of ids) expect(await s.client.get(id)).toMatchObject({ status: 'done', token: 1, owner: 'w1' });
    expect(await s.receiver.totals()).toEqual({ effects: 12, qty: 12 });
    // The first claim filled the four slots at once; after that, finishes brought the next jobs.
    const claims = events.filter((e) => e.event === 'claimed');
    expect(claims.slice(0, 4).every((e) => e.via === undefined)).toBe(true);
    expect(claims.filter((e) => e.via === 'finish').length).toBeGreaterThanOrEqual(8);
    // Alone, or together with other slots' finishes in one request (finish-batch.test.ts).
    expect((calls.finishAndClaim ?? 0) + (calls.finishManyWithNext ?? 0)).toBeGreaterThanOrEqual(8);
    expect(calls.claim ?? 0).toBe(0);
    // Each renewal is its own request, on its lease's own timer.
    const renewals = events.filter(
      (e) => e.event === 'renewed' || ((e.event === 'call_failed' || e.event === 'refused') && e.op === 'renew'),
    );
    expect(renewals.length).toBe(calls.heartbeat ?? 0);
    expect(events.at(-1)).toMatchObject({ event: 'stopped', claimed: 12 });
  });

  test('maxJobs with concurrency: exactly maxJobs claimed, counting the claims finishes make', async () => {
    const s = await setup();
    for (let i = 1; i <= 10; i += 1) await s.client.enqueue({ id: `m${i}`, qty: 1 });

    const summary = await runWorker({
      queueUrl: s.queue.url,
      gatewayUrl: s.gateway.url,
      name: 'w1',
      leaseMs: 3_000,
      concurrency: 3,
      maxJobs: 5,
      handler: async () => {
        await sleep(50);
      },
    });

    expect(summary).toEqual({ claimed: 5, finished: 5, failed: 0, lost: 0, released: 0 });
    expect(await s.client.stats()).toMatchObject({ done: 5, pending: 5, leased: 0 });
  });
});

describe('long poll', () => {
  test('an idle worker waits in one claim; a job enqueued meanwhile starts at once, not at a next poll', async () => {
    const s = await setup();
    const { queue, calls } = counted(s);
    const events: WorkerEvent[] = [];
    const stop = new AbortController();
    let startedAt = 0;

    const running = runWorker({
      queueUrl: s.queue.url,
      gatewayUrl: s.gateway.url,
      name: 'w1',
      leaseMs: 900,
      waitMs: 20_000,
      // Were the worker polling, it would not look again for a minute.
      pollMs: 60_000,
      queue,
      signal: stop.signal,
      onEvent: (e) => events.push(e),
      handler: () => {
        startedAt = Date.now();
      },
    });
    await eventually('the worker to be waiting', () => (calls.claimMany === 1 ? true : undefined));
    await sleep(500);
    const enqueuedAt = Date.now();
    await s.client.enqueue({ id: 'late', qty: 1 });
    await eventually('the job to be done', async () =>
      (await s.client.get('late')).status === 'done' ? true : undefined,
    );
    const stoppingAt = Date.now();
    stop.abort();

    await expect(running).resolves.toMatchObject({ claimed: 1, finished: 1 });
    // Generous for a loaded machine; a poll would have taken a minute.
    expect(startedAt - enqueuedAt).toBeLessThan(3_000);
    // Stopping ends the wait at once.
    expect(Date.now() - stoppingAt).toBeLessThan(3_000);
    // The claim waited 500 ms or more, longer than the 300 ms heartbeat interval: the lease was
    // renewed before the handler relied on it.
    const steps = events.filter((e) => 'job' in e && e.job === 'late').map((e) => e.event);
    expect(steps.slice(0, 2)).toEqual(['claimed', 'renewed']);
  });
});
