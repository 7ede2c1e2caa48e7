// Sends coalesced across a worker's slots, against the real gateway (and the real queue and
// receiver behind it) through a proxy that counts, holds, cuts and answers requests: slots that
// send together share one POST /sends, each getting its own outcome or its own refusal; a lone
// send goes at once by the single route; a batch holds no more than the gateway's body limit; a
// cut answer leaves each send to its own retry, and the effect is recorded once; a gateway
// without the route gets every send alone. The abort rules are pinned on a replaced gateway API.
import { describe, expect, test } from 'vitest';
import { ManualClock } from '../../testing/clock.js';
import { GatewayError } from '../../gateway/client.js';
import type { SendRequest } from '../../gateway/types.js';
import { runWorker, type Handler, type WorkerEvent, type WorkerSummary } from '../../worker/index.js';
import { SendCoalescer } from '../../worker/send-batch.js';
import type { EffectSender, SendOutcome } from '../../worker/types.js';
import { enqueue, gate, ids } from './finish-kit.js';
import { queueProxy, type QueueProxy } from './proxy.js';
import { setup, type Setup } from './setup.js';

/** A worker whose sends go through the proxy, on a clock that stands still: no renewal before a send. */
function start(
  s: Setup,
  proxy: QueueProxy,
  handler: Handler,
  options: { concurrency: number; maxJobs: number },
): { events: WorkerEvent[]; running: Promise<WorkerSummary> } {
  const events: WorkerEvent[] = [];
  const running = runWorker({
    queueUrl: s.queue.url,
    gatewayUrl: proxy.url,
    name: 'w1',
    leaseMs: 30_000,
    ...options,
    waitMs: 0,
    pollMs: 20,
    clock: new ManualClock(),
    onEvent: (e) => events.push(e),
    handler,
  });
  return { events, running };
}

const sendRequests = (proxy: QueueProxy) => proxy.requests.filter((r) => r === 'POST /sends' || r === 'POST /send');
const of = (events: WorkerEvent[], name: string) =>
  events.filter((e) => e.event === name).map((e) => ('job' in e ? e.job : ''));

describe('sends coalesced across slots', () => {
  test('eight slots that send together share one POST /sends, and each gets its own outcome', async () => {
    const s = await setup();
    const proxy = await queueProxy(s.gateway.url);
    await enqueue(s, ids('j', 8));
    const handlers = gate(8);
    void handlers.full.then(handlers.open);
    const run = start(
      s,
      proxy,
      async (ctx) => {
        await handlers.wait();
        return (await ctx.send()).outcome;
      },
      { concurrency: 8, maxJobs: 8 },
    );
    await expect(run.running).resolves.toMatchObject({ claimed: 8, finished: 8, lost: 0 });
    expect(sendRequests(proxy)).toEqual(['POST /sends']);
    expect(of(run.events, 'sent').sort()).toEqual(ids('j', 8).sort());
    for (const id of ids('j', 8)) expect(await s.client.get(id)).toMatchObject({ status: 'done', result: 'applied' });
    expect(await s.receiver.totals()).toEqual({ effects: 8, qty: 8 });
  });

  test('a batch with cancelled jobs and a stale token: those slots are refused and lose their leases, the others send and finish', async () => {
    const s = await setup();
    const proxy = await queueProxy(s.gateway.url);
    const jobs = ids('j', 8);
    await enqueue(s, jobs);
    const handlers = gate(8);
    const run = start(
      s,
      proxy,
      async (ctx) => {
        await handlers.wait();
        await ctx.send();
        return 'sent';
      },
      { concurrency: 8, maxJobs: 8 },
    );
    await handlers.full;
    await s.client.cancel('j2', { reason: 'withdrawn' });
    await s.client.cancel('j3', { reason: 'withdrawn' });
    // j5 is cancelled, retried and claimed by another owner: the worker's token 1 is one behind.
    await s.client.cancel('j5');
    await s.client.retry('j5');
    const thief = await s.client.claim('thief', 60_000);
    expect(thief, 'the retried job is the one claimed').toMatchObject({ id: 'j5', token: 2 });
    handlers.open();

    await expect(run.running).resolves.toMatchObject({ claimed: 8, finished: 5, lost: 3 });
    expect(sendRequests(proxy)).toEqual(['POST /sends']);
    const refused = run.events.filter((e) => e.event === 'refused');
    expect(refused.map((e) => ['job' in e ? e.job : '', 'code' in e ? e.code : ''])).toEqual(
      expect.arrayContaining([
        ['j2', 'stale_lease'],
        ['j3', 'stale_lease'],
        ['j5', 'stale_lease'],
      ]),
    );
    expect(of(run.events, 'lost').sort()).toEqual(['j2', 'j3', 'j5']);
    // Nothing of the refused three reached the receiver; j5 is still the thief's.
    expect((await s.receiver.effects()).map((e) => e.jobId).sort()).toEqual(['j1', 'j4', 'j6', 'j7', 'j8']);
    expect(await s.client.get('j5')).toMatchObject({ status: 'leased', owner: 'thief', token: 2 });
  });

  test('an answer cut after the gateway forwarded the batch: each send fails as its own would, and sent again is a duplicate', async () => {
    const s = await setup();
    const proxy = await queueProxy(s.gateway.url);
    await enqueue(s, ids('j', 4));
    const handlers = gate(4);
    void handlers.full.then(handlers.open);
    const cut = proxy.cutAnswer('POST /sends');
    const run = start(
      s,
      proxy,
      async (ctx) => {
        await handlers.wait();
        try {
          return (await ctx.send()).outcome;
        } catch {
          return (await ctx.send()).outcome;
        }
      },
      { concurrency: 4, maxJobs: 4 },
    );
    await cut;
    await expect(run.running).resolves.toMatchObject({ claimed: 4, finished: 4, lost: 0 });
    expect(of(run.events, 'send_failed').sort()).toEqual(ids('j', 4));
    for (const id of ids('j', 4)) expect(await s.client.get(id)).toMatchObject({ status: 'done', result: 'duplicate' });
    // Each effect once, though every send went twice.
    expect(await s.receiver.totals()).toEqual({ effects: 4, qty: 4 });
  });

  test('sends too large for one request together go in several batches, each under the body limit: none refused', async () => {
    const s = await setup();
    const proxy = await queueProxy(s.gateway.url);
    const jobs = ids('j', 20);
    await enqueue(s, jobs);
    const handlers = gate(20);
    void handlers.full.then(handlers.open);
    // 20 bodies of about 60 KiB: 1.2 MiB together, over the gateway's 1 MiB.
    const big = 'x'.repeat(60 * 1024);
    const run = start(
      s,
      proxy,
      async (ctx) => {
        await handlers.wait();
        return (await ctx.send({ key: 'doc', body: { text: big } })).outcome;
      },
      { concurrency: 20, maxJobs: 20 },
    );
    await expect(run.running).resolves.toMatchObject({ claimed: 20, finished: 20 });
    const batches = sendRequests(proxy).filter((r) => r === 'POST /sends');
    expect(batches.length, sendRequests(proxy).join(', ')).toBeGreaterThanOrEqual(2);
    expect(proxy.answers.filter((a) => a.endsWith('/sends') || a.endsWith('/send'))).toEqual(
      sendRequests(proxy).map((route) => `200 ${route}`),
    );
    expect((await s.receiver.effects()).length).toBe(20);
  });

  test('a lone send goes at once by the single route', async () => {
    const s = await setup();
    const proxy = await queueProxy(s.gateway.url);
    await enqueue(s, ids('j', 3));
    const run = start(s, proxy, async (ctx) => (await ctx.send()).outcome, { concurrency: 1, maxJobs: 3 });
    await expect(run.running).resolves.toMatchObject({ finished: 3 });
    expect(sendRequests(proxy)).toEqual(['POST /send', 'POST /send', 'POST /send']);
  });
});

describe('a gateway without POST /sends', () => {
  test('answers the first batch 404 not_found: those sends go alone, and every send after them too', async () => {
    const s = await setup();
    const proxy = await queueProxy(s.gateway.url);
    proxy.answer('POST /sends', 404, {
      error: { code: 'not_found', message: 'There is no POST /sends on the gateway; it serves POST /send.' },
    });
    await enqueue(s, ids('j', 8));
    const first = gate(4);
    void first.full.then(first.open);
    const run = start(
      s,
      proxy,
      async (ctx) => {
        // The first four together, the rest together after them.
        if (ctx.lease.id <= 'j4') await first.wait();
        return (await ctx.send()).outcome;
      },
      { concurrency: 4, maxJobs: 8 },
    );
    await expect(run.running).resolves.toMatchObject({ claimed: 8, finished: 8 });
    const routes = sendRequests(proxy);
    expect(
      routes.filter((r) => r === 'POST /sends'),
      routes.join(', '),
    ).toEqual(['POST /sends']);
    expect(routes.filter((r) => r === 'POST /send').length).toBe(8);
    expect(await s.receiver.totals()).toEqual({ effects: 8, qty: 8 });
  });
});

describe('the coalescer on a replaced gateway API', () => {
  const request = (jobId: string): SendRequest => ({ jobId, owner: 'w', token: 1, qty: 1 });
  const outcome = (jobId: string): SendOutcome => ({
    outcome: 'applied',
    effect: { jobId, qty: 1, token: 1, appliedAt: 0 },
  });

  /** A gateway API whose batch answers wait for `release()`; it records every call. */
  function heldApi() {
    const calls: string[] = [];
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let batchSignal: AbortSignal | undefined;
    const api: EffectSender = {
      send: async (input) => {
        calls.push(`send ${input.jobId}`);
        return outcome(input.jobId);
      },
      sendMany: async (sends, options) => {
        calls.push(`sendMany ${sends.map((one) => one.jobId).join(',')}`);
        batchSignal = options?.signal;
        await released;
        return sends.map((one) => outcome(one.jobId));
      },
    };
    return { api, calls, release, signal: () => batchSignal };
  }

  test('a send aborted while its batch is on its way is settled at once; the others get their answers', async () => {
    const held = heldApi();
    const coalescer = new SendCoalescer(held.api);
    const lost = new AbortController();
    const sends = [
      coalescer.send(request('a')),
      coalescer.send(request('b'), { signal: lost.signal }),
      coalescer.send(request('c')),
    ];
    await new Promise((resolve) => setImmediate(resolve));
    expect(held.calls).toEqual(['sendMany a,b,c']);
    lost.abort(new Error('lease lost'));
    await expect(sends[1]).rejects.toThrow('lease lost');
    expect(held.signal()?.aborted, 'the batch goes on for the others').toBe(false);
    held.release();
    expect(await sends[0]).toEqual(outcome('a'));
    expect(await sends[2]).toEqual(outcome('c'));
  });

  test('a send aborted while it waits never goes; a batch whose sends are all aborted is cancelled', async () => {
    const held = heldApi();
    const coalescer = new SendCoalescer(held.api);
    const controllers = [new AbortController(), new AbortController()];
    const first = [
      coalescer.send(request('a'), { signal: controllers[0]!.signal }),
      coalescer.send(request('b'), { signal: controllers[1]!.signal }),
    ];
    await new Promise((resolve) => setImmediate(resolve));
    const waiting = new AbortController();
    const late = coalescer.send(request('late'), { signal: waiting.signal });
    waiting.abort(new Error('gave up'));
    await expect(late).rejects.toThrow('gave up');
    for (const controller of controllers) controller.abort(new Error('lost'));
    await Promise.allSettled(first);
    expect(held.signal()?.aborted, 'every send of the batch aborted').toBe(true);
    held.release();
    await new Promise((resolve) => setImmediate(resolve));
    expect(held.calls).toEqual(['sendMany a,b']);
  });

  test('an answer that is not one result per send fails each send as unanswered; a 400 sends each again alone', async () => {
    const calls: string[] = [];
    const short = new SendCoalescer({
      send: async (input) => outcome(input.jobId),
      sendMany: async (sends) => sends.slice(1).map((one) => outcome(one.jobId)),
    });
    const results = await Promise.allSettled([short.send(request('a')), short.send(request('b'))]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    expect((results[0] as PromiseRejectedResult).reason).toMatchObject({ code: 'gateway_unavailable' });
    expect(((results[0] as PromiseRejectedResult).reason as Error).message).toContain('1 results to a batch of 2');

    const refused = new SendCoalescer({
      send: async (input) => {
        calls.push(`send ${input.jobId}`);
        if (input.jobId === 'bad') throw new GatewayError('invalid_request', 'bad alone');
        return outcome(input.jobId);
      },
      sendMany: async (sends) => {
        calls.push(`sendMany ${sends.map((one) => one.jobId).join(',')}`);
        throw new GatewayError('invalid_request', 'The request body is invalid: sends.1.token: ...');
      },
    });
    const alone = await Promise.allSettled([refused.send(request('ok')), refused.send(request('bad'))]);
    expect(alone.map((r) => (r.status === 'fulfilled' ? r.value.outcome : (r.reason as Error).message))).toEqual([
      'applied',
      'bad alone',
    ]);
    expect(calls).toEqual(['sendMany ok,bad', 'send ok', 'send bad']);
  });
});
