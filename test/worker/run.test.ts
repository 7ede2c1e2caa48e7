// The worker loop: claims until stopped, reports a timeline, waits out an empty queue, and on
// stop gives the job in hand its grace time, then releases its lease so another worker can take it at once.
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, test } from 'vitest';
import { createWorker, runWorker, WORKER_DEFAULTS, type WorkerEvent } from '../../worker/index.js';
import { parseMetrics } from '../helpers/metrics.js';
import { typeErrors } from '../helpers/type-errors.js';
import { eventually, setup, timeline } from './setup.js';

/**
 * The events without the lease keeper's heartbeats: a renewal (or a renew call that timed out)
 * lands wherever the handler happens to be when it is due, which a loaded machine moves about.
 */
function ownSteps(events: WorkerEvent[]): WorkerEvent[] {
  return events.filter(
    (e) => !(e.event === 'renewed' && e.stage === undefined) && !(e.event === 'call_failed' && e.op === 'renew'),
  );
}

describe('runWorker', () => {
  test('works through the queue, one timeline entry per step, and stops cleanly on abort', async () => {
    const s = await setup();
    for (const [id, qty] of Object.entries({ a: 1, b: 2, c: 3 })) await s.client.enqueue({ id, qty });
    const events: WorkerEvent[] = [];
    const stop = new AbortController();

    const running = runWorker({
      queueUrl: s.queue.url,
      gatewayUrl: s.gateway.url,
      name: 'w1',
      leaseMs: 900,
      pollMs: 50,
      signal: stop.signal,
      onEvent: (e) => events.push(e),
      handler: async (ctx) => {
        await ctx.stage('sending');
        return (await ctx.send(ctx.lease.qty)).outcome;
      },
    });
    await eventually('three jobs done', async () => ((await s.client.stats()).done === 3 ? true : undefined));
    // An empty queue is polled, not hammered, and not an error: the worker's claim waits at the
    // queue (a long poll), so the idle time answers next to no claims.
    const idleFrom = await claimsAnswered(s.queue.url);
    await sleep(500);
    expect(
      (await claimsAnswered(s.queue.url)) - idleFrom,
      'claims answered in 500 ms of an empty queue',
    ).toBeLessThanOrEqual(2);
    expect(events.filter((e) => e.event === 'claim_failed')).toEqual([]);
    stop.abort();

    await expect(running).resolves.toEqual({ claimed: 3, finished: 3, failed: 0, lost: 0, released: 0 });
    const ownTimeline = ['claimed', 'renewed:sending', 'sent', 'finished'];
    for (const id of ['a', 'b', 'c']) {
      const steps = timeline(events, id);
      expect(steps.at(0), steps.join(' ')).toBe('claimed');
      expect(steps.at(-1), steps.join(' ')).toBe('finished');
      // Once each, in this order, and nothing refused, failed or lost in between.
      expect(timeline(ownSteps(events), id), steps.join(' ')).toEqual(ownTimeline);
    }
    expect(timeline(events).at(0)).toBe('started');
    expect(timeline(events).slice(-2)).toEqual(['stopping', 'stopped']);
    expect(events.every((e) => e.worker === 'w1' && Number.isInteger(e.t))).toBe(true);
    expect(await s.receiver.totals()).toEqual({ effects: 3, qty: 6 });
  });

  // --wait-ms 0 turns the long poll off: each empty answer is then followed by pollMs, as
  // worker.md says, not by the next claim at once.
  test('with waitMs 0, an empty queue is polled every pollMs, not claimed again at once', async () => {
    const s = await setup();
    const stop = new AbortController();
    const events: WorkerEvent[] = [];
    const running = runWorker({
      queueUrl: s.queue.url,
      gatewayUrl: s.gateway.url,
      name: 'w1',
      waitMs: 0,
      pollMs: 100,
      signal: stop.signal,
      onEvent: (e) => events.push(e),
      handler: () => undefined,
    });
    const from = await claimsAnswered(s.queue.url);
    await sleep(1_000);
    const claims = (await claimsAnswered(s.queue.url)) - from;
    stop.abort();
    await running;
    // About 10 at one per 100 ms; a worker claiming again at once made hundreds.
    expect(claims, 'claims answered in 1 s of an empty queue at pollMs 100').toBeLessThanOrEqual(15);
    expect(claims, 'and it did poll').toBeGreaterThanOrEqual(3);
    expect(events.filter((e) => e.event === 'claim_failed')).toEqual([]);
  });

  test('stopped mid-job: the job gets graceMs, then its lease is released for another worker to take at once', async () => {
    const s = await setup();
    await s.client.enqueue({ id: 'slow', qty: 2 });
    const events: WorkerEvent[] = [];
    const stop = new AbortController();
    let handlerSignal: AbortSignal | undefined;

    const running = runWorker({
      queueUrl: s.queue.url,
      gatewayUrl: s.gateway.url,
      name: 'w1',
      leaseMs: 900,
      pollMs: 50,
      graceMs: 200,
      signal: stop.signal,
      onEvent: (e) => events.push(e),
      // Long work that stops when told to.
      handler: async (ctx) => {
        handlerSignal = ctx.signal;
        await sleep(30_000, undefined, { signal: ctx.signal });
      },
    });
    await eventually('the job to be claimed', () => (events.some((e) => e.event === 'claimed') ? true : undefined));
    const stoppedAt = Date.now();
    stop.abort();

    await expect(running).resolves.toEqual({ claimed: 1, finished: 0, failed: 0, lost: 0, released: 1 });
    expect(Date.now() - stoppedAt).toBeGreaterThanOrEqual(190);
    expect(Date.now() - stoppedAt).toBeLessThan(5_000);
    expect(handlerSignal?.aborted).toBe(true);
    expect(String(handlerSignal?.reason)).toMatch(/worker "w1" stopped before the job was done/);
    expect(timeline(ownSteps(events))).toEqual(['started', 'claimed', 'stopping', 'grace_over', 'released', 'stopped']);
    expect(events.find((e) => e.event === 'stopping')).toMatchObject({ running: 1, graceMs: 200 });
    // Pending at once, the attempt given back: the next claim is attempt 1 again, under a new token.
    const job = await s.client.get('slow');
    expect(job).toMatchObject({ status: 'pending', attempts: 0, lastError: null });
    await expect(s.client.claim('w2', 900)).resolves.toMatchObject({ id: 'slow', owner: 'w2', token: 2, attempt: 1 });
  });

  test('keeps polling while the queue is unreachable, and stops cleanly', async () => {
    const s = await setup();
    const events: WorkerEvent[] = [];
    const stop = new AbortController();
    const running = runWorker({
      queueUrl: 'http://127.0.0.1:1', // nothing listens there
      gatewayUrl: s.gateway.url,
      name: 'w1',
      pollMs: 20,
      signal: stop.signal,
      onEvent: (e) => events.push(e),
      handler: () => undefined,
    });
    await eventually('two failed claims', () =>
      events.filter((e) => e.event === 'claim_failed').length >= 2 ? true : undefined,
    );
    stop.abort();
    await expect(running).resolves.toEqual({ claimed: 0, finished: 0, failed: 0, lost: 0, released: 0 });
  });

  test('refuses options it cannot honour, saying which', () => {
    const base = { queueUrl: 'http://127.0.0.1:4100', gatewayUrl: 'http://127.0.0.1:4200', name: 'w1' };
    expect(() => createWorker({ ...base, leaseMs: 100 })).toThrow(
      new RangeError('leaseMs must be an integer from 300 to 604800000, not 100.'),
    );
    // A value of the wrong kind is a TypeError, as the docs promise.
    expect(() => createWorker({ ...base, leaseMs: '' as never })).toThrow(TypeError);
    expect(() => createWorker({ ...base, prefetch: '2' as never })).toThrow(TypeError);
    expect(() => createWorker({ ...base, name: '' })).toThrow(/name must be a non-empty string/);
    expect(() => createWorker({ ...base, queueUrl: 'ftp://x' })).toThrow(/queueUrl must be an http:\/\/ URL/);
  });

  test.each([
    [{ onEvent: 5 }, 'onEvent must be a function, not 5.'],
    [{ hooks: 'x' }, 'hooks must be an object of beforeSend and beforeFinish, not "x".'],
    [{ hooks: { beforeSend: true } }, 'hooks.beforeSend must be a function, not true.'],
    [{ clock: {} }, 'clock must be an object with a now() method, not {}.'],
    [{ apiKey: 5 }, 'apiKey must be a string, not 5.'],
    // What `process.env.LEASE_MS && Number(process.env.LEASE_MS)` gives for an empty variable.
    [{ leaseMs: '' }, 'leaseMs must be an integer from 300 to 604800000, not "".'],
    [{ concurrency: '4' }, 'concurrency must be an integer from 1 to 100, not "4".'],
    [{ prefetch: '2' }, 'prefetch must be \'auto\' or an integer from 0 to 99, not "2".'],
  ])('refuses %j at createWorker, not when the worker first uses it', (option, message) => {
    const base = { queueUrl: 'http://127.0.0.1:4100', gatewayUrl: 'http://127.0.0.1:4200', name: 'w1' };
    expect(() => createWorker({ ...base, ...(option as object) })).toThrow(message);
  });

  test('run() and process() refuse a handler that is not a function, and bad run options, before claiming anything', async () => {
    const s = await setup();
    await s.client.enqueue({ id: 'kept', qty: 1 });
    const worker = createWorker({ queueUrl: s.queue.url, gatewayUrl: s.gateway.url, name: 'w1', waitMs: 0 });
    try {
      const bad: Array<[() => Promise<unknown>, string]> = [
        [() => worker.run(undefined as never), 'The handler must be a function (ctx) => result, not undefined.'],
        [() => worker.run(() => 1, { maxJobs: -1 }), 'maxJobs must be a whole number of jobs, 0 or more, not -1.'],
        [() => worker.run(() => 1, { maxJobs: 1.5 }), 'maxJobs must be a whole number of jobs, 0 or more, not 1.5.'],
        [() => worker.run(() => 1, { signal: 'x' as never }), 'signal must be an AbortSignal, not "x".'],
      ];
      for (const [call, message] of bad) await expect(call()).rejects.toThrow(message);
      // Nothing was claimed: the job is as it was enqueued.
      expect(await s.client.get('kept')).toMatchObject({ status: 'pending', attempts: 0, token: 0 });

      const lease = await worker.claim();
      await expect(worker.process(lease!, 5 as never)).rejects.toThrow(
        'The handler must be a function (ctx) => result, not 5.',
      );
      // The lease is still held, its attempt not spent on a handler that could never run.
      expect(await s.client.get('kept')).toMatchObject({ status: 'leased', attempts: 1, token: 1, owner: 'w1' });
    } finally {
      await worker.close();
    }
  });

  // process.env.X and `cond ? value : undefined` are how options are often given; under
  // exactOptionalPropertyTypes an option typed `?: T` refuses them though the worker takes them.
  test('every optional option takes undefined as left out, in its type and at run time', () => {
    const source = `
      import type { ClaimedLease, RunWorkerOptions, WorkerOptions } from '../../worker/index.js';
      import type { System } from '../../testing/index.js';
      declare const lease: ClaimedLease['lease'];
      declare const system: System;
      const options: WorkerOptions = {
        queueUrl: 'http://127.0.0.1:4100', gatewayUrl: 'http://127.0.0.1:4200', name: 'w1', apiKey: undefined,
        leaseMs: undefined, concurrency: undefined, prefetch: undefined, waitMs: undefined, pollMs: undefined,
        graceMs: undefined, sendGraceMs: undefined, outputRoot: undefined, onEvent: undefined,
        hooks: { beforeSend: undefined, beforeFinish: undefined }, clock: undefined, queue: undefined, gateway: undefined,
      };
      export const run: RunWorkerOptions = { ...options, hooks: undefined, handler: () => 1, signal: undefined, maxJobs: undefined };
      export const claimed: ClaimedLease = { lease, claimedAt: 0, answeredAt: undefined };
      export const kit = system.worker('w2', { queueUrl: undefined, clock: undefined, graceMs: undefined });
    `;
    expect(typeErrors(source, { exactOptionalPropertyTypes: true }), 'type errors').toEqual([]);

    const worker = createWorker({
      queueUrl: 'http://127.0.0.1:4100',
      gatewayUrl: 'http://127.0.0.1:4200',
      name: 'w1',
      ...{ leaseMs: undefined, concurrency: undefined, prefetch: undefined, waitMs: undefined, pollMs: undefined },
      ...{ graceMs: undefined, sendGraceMs: undefined, outputRoot: undefined, onEvent: undefined, hooks: undefined },
      ...{ clock: undefined, queue: undefined, gateway: undefined, apiKey: undefined },
    });
    const { leaseMs, concurrency, prefetch, waitMs, pollMs, graceMs, outputRoot } = worker.options;
    expect({ leaseMs, concurrency, prefetch, waitMs, pollMs, graceMs, outputRoot }).toEqual({
      ...WORKER_DEFAULTS,
      outputRoot: undefined,
    });
    void worker.close();
  });
});

/** Claims the queue has answered so far, whatever their status, by its own `GET /metrics`. */
async function claimsAnswered(queueUrl: string): Promise<number> {
  const scrape = parseMetrics(await (await fetch(`${queueUrl}/metrics`)).text());
  return scrape
    .series('leasehold_http_requests_total')
    .filter((s) => s.labels.route === '/claims')
    .reduce((sum, s) => sum + s.value, 0);
}
