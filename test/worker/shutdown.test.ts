// Stopping a worker with jobs running: no new claims, handlers get graceMs, then the leases of
// those still running are released — claimable at once, their attempts given back — and their
// signals aborted; a handler that ignores its signal is left behind and can do nothing more.
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, test } from 'vitest';
import { createWorker, runWorker, type JobContext, type WorkerEvent } from '../../worker/index.js';
import { closeAfterTest, eventually, setup } from './setup.js';

describe('stopping with jobs running', () => {
  test('a job that ends within graceMs finishes (claiming nothing more); the others are released at once, attempts given back', async () => {
    const s = await setup();
    for (const id of ['quick', 'heeds', 'ignores', 'extra']) await s.client.enqueue({ id, qty: 1 });
    const events: WorkerEvent[] = [];
    const stop = new AbortController();
    const contexts = new Map<string, JobContext>();
    let letIgnorerGoOn!: () => void;
    const ignorerGoesOn = new Promise<void>((resolve) => (letIgnorerGoOn = resolve));
    let ignorerSend: Promise<unknown> | undefined;

    const running = runWorker({
      queueUrl: s.queue.url,
      gatewayUrl: s.gateway.url,
      name: 'w1',
      leaseMs: 900,
      concurrency: 3,
      graceMs: 600,
      signal: stop.signal,
      onEvent: (e) => events.push(e),
      handler: async (ctx) => {
        contexts.set(ctx.lease.id, ctx);
        switch (ctx.lease.id) {
          case 'quick':
            await sleep(200);
            return 'done in time';
          case 'heeds':
            await sleep(60_000, undefined, { signal: ctx.signal });
            return 'never';
          default:
            // Deaf to its signal: it goes on after the worker has stopped, then tries to send.
            await ignorerGoesOn;
            ignorerSend = ctx.send().catch((err: unknown) => err);
            return 'never';
        }
      },
    });
    await eventually('three jobs claimed', () => (contexts.size === 3 ? true : undefined));
    const stoppedAt = Date.now();
    stop.abort();

    await expect(running).resolves.toEqual({ claimed: 3, finished: 1, failed: 0, lost: 0, released: 2 });
    expect(Date.now() - stoppedAt).toBeGreaterThanOrEqual(590);
    expect(Date.now() - stoppedAt).toBeLessThan(5_000);
    expect(events.find((e) => e.event === 'stopping')).toMatchObject({ running: 3, graceMs: 600 });
    expect(events.find((e) => e.event === 'grace_over')).toMatchObject({ running: 2 });
    const released = events.filter((e) => e.event === 'released').map((e) => ('job' in e ? e.job : ''));
    expect(released.sort()).toEqual(['heeds', 'ignores']);
    expect(events.at(-1)).toMatchObject({ event: 'stopped', released: 2 });
    expect(contexts.get('heeds')!.signal.aborted).toBe(true);
    expect(contexts.get('ignores')!.signal.aborted).toBe(true);
    expect(contexts.get('quick')!.signal.aborted).toBe(false);

    // The finish during the grace claimed nothing: the fourth job was never touched.
    expect(await s.client.get('quick')).toMatchObject({ status: 'done', result: 'done in time' });
    expect(await s.client.get('extra')).toMatchObject({ status: 'pending', attempts: 0, token: 0 });
    // Claimable at once by another worker, as attempt 1 again, under a newer token.
    for (const id of ['heeds', 'ignores']) {
      expect(await s.client.get(id)).toMatchObject({ status: 'pending', attempts: 0 });
    }
    const retaken = await s.client.claimMany('w2', { max: 3, leaseMs: 5_000 });
    expect(retaken.map((l) => [l.id, l.token, l.attempt]).sort()).toEqual([
      ['extra', 1, 1],
      ['heeds', 2, 1],
      ['ignores', 2, 1],
    ]);

    // The deaf handler wakes: its send is refused before any request leaves.
    letIgnorerGoOn();
    await eventually('the deaf handler to try its send', () => ignorerSend);
    expect(String(await ignorerSend)).toMatch(/worker "w1" stopped before the job was done; its lease is released/);
    expect(await s.receiver.journal()).toEqual([]);
  });

  test('a claim answered just as the worker stops: the lease is released unworked, the handler never runs', async () => {
    const s = await setup();
    await s.client.enqueue({ id: 'j', qty: 1 });
    const events: WorkerEvent[] = [];
    const stop = new AbortController();
    let ran = false;

    const summary = await runWorker({
      queueUrl: s.queue.url,
      gatewayUrl: s.gateway.url,
      name: 'w1',
      leaseMs: 900,
      // The queue's answer arrives after the stop (the claim was already made).
      queue: s.queueApi({
        claimMany: async (owner, input) => {
          const leases = await s.client.claimMany(owner, { ...input, waitMs: 0 });
          stop.abort();
          return leases;
        },
      }),
      signal: stop.signal,
      onEvent: (e) => events.push(e),
      handler: () => {
        ran = true;
      },
    });

    expect(ran).toBe(false);
    expect(summary).toEqual({ claimed: 1, finished: 0, failed: 0, lost: 0, released: 1 });
    expect(events.map((e) => e.event)).toEqual(['started', 'stopping', 'claimed', 'released', 'stopped']);
    expect(await s.client.get('j')).toMatchObject({ status: 'pending', attempts: 0, token: 1 });
  });
  test("a handler that ends by throwing the stop's abort is released at once, not failed: its attempt given back", async () => {
    const s = await setup();
    await s.client.enqueue({ id: 'waits', qty: 1 });
    const events: WorkerEvent[] = [];
    const stop = new AbortController();
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));

    const summary = runWorker({
      queueUrl: s.queue.url,
      gatewayUrl: s.gateway.url,
      name: 'w1',
      leaseMs: 900,
      graceMs: 30_000,
      signal: stop.signal,
      onEvent: (e) => events.push(e),
      // Waits for something on the run's own signal: the wait ends with an AbortError caused by the stop.
      handler: async () => {
        started();
        await sleep(60_000, undefined, { signal: stop.signal });
        return 'never';
      },
    });
    await running;
    const stoppedAt = Date.now();
    stop.abort();

    expect(await summary).toEqual({ claimed: 1, finished: 0, failed: 0, lost: 0, released: 1 });
    expect(Date.now() - stoppedAt, 'ms from the stop to the end of the run (graceMs is 30 s)').toBeLessThan(5_000);
    expect(events.map((e) => e.event).filter((e) => e !== 'renewed')).toEqual([
      'started',
      'claimed',
      'stopping',
      'released',
      'stopped',
    ]);
    expect(await s.client.get('waits')).toMatchObject({ status: 'pending', attempts: 0, lastError: null });
  });
});

describe('close() with a job that process() is running', () => {
  test('the job gets graceMs, then its lease is released, and close() waits for it', async () => {
    const s = await setup();
    await s.client.enqueue({ id: 'held', qty: 1 });
    const { worker, events } = s.worker({ leaseMs: 60_000, graceMs: 300 });
    let signalled: AbortSignal | undefined;
    const outcome = worker.process((await worker.claim())!, async (ctx) => {
      signalled = ctx.signal;
      await sleep(60_000, undefined, { signal: ctx.signal });
      return 'never';
    });
    await eventually('the handler started', () => signalled);
    const closedAt = Date.now();
    await worker.close();
    const waited = Date.now() - closedAt;

    expect(waited, 'close() gave the handler graceMs').toBeGreaterThanOrEqual(290);
    expect(waited, 'then released, not held to the lease').toBeLessThan(10_000);
    await expect(outcome).resolves.toMatchObject({ status: 'released' });
    expect(signalled!.aborted).toBe(true);
    expect(events.some((e) => e.event === 'released' && 'job' in e && e.job === 'held')).toBe(true);
    expect(await s.client.get('held')).toMatchObject({ status: 'pending', owner: null });
  });

  test('after close(), claim() and run() are refused, so no lease is taken that nothing runs', async () => {
    const s = await setup();
    const { worker, events } = s.worker();
    const claimed = (await s.client.enqueue({ id: 'before', qty: 1 }), await worker.claim())!;
    await worker.close();
    await s.client.enqueue({ id: 'after', qty: 1 });

    await expect(worker.claim()).rejects.toThrow(
      new Error('worker.claim: the worker is closed; create another to claim and run jobs.'),
    );
    await expect(worker.run(() => undefined)).rejects.toThrow(
      new Error('worker.run: the worker is closed; create another to claim and run jobs.'),
    );
    expect(await s.client.get('after'), 'not claimed: no lease, no token spent').toMatchObject({
      status: 'pending',
      token: 0,
      attempts: 0,
    });
    // A lease claimed before close() is handed back by process(), its attempt given back.
    await expect(worker.process(claimed, () => 'never')).resolves.toMatchObject({ status: 'released' });
    expect(await s.client.get('before')).toMatchObject({ status: 'pending', attempts: 0, owner: null });
    expect(events.filter((e) => e.event === 'claimed').map((e) => ('job' in e ? e.job : ''))).toEqual(['before']);
  });

  // A hook that never returns, and ignores the signal it is given: the stop does not wait for it.
  test.each(['beforeSend', 'beforeFinish'] as const)(
    'a job held in a %s hook that ignores its signal: released after graceMs, and close() returns',
    async (hook) => {
      const s = await setup();
      await s.client.enqueue({ id: 'stuck', qty: 1 });
      let arrived!: () => void;
      const inHook = new Promise<void>((resolve) => (arrived = resolve));
      const events: WorkerEvent[] = [];
      const worker = createWorker({
        queueUrl: s.queue.url,
        gatewayUrl: s.gateway.url,
        name: 'w1',
        leaseMs: 60_000,
        graceMs: 300,
        onEvent: (e) => events.push(e),
        hooks: {
          [hook]: () => {
            arrived();
            return new Promise<void>(() => {});
          },
        },
      });
      // Not s.worker(): a close() that never returns must fail this test, not hang the cleanup.
      closeAfterTest(() => Promise.race([worker.close(), sleep(1_000)]));
      const outcome = worker.process((await worker.claim())!, async (ctx) => {
        await ctx.send();
        return 'sent';
      });
      await inHook;
      const closedAt = Date.now();
      const closed = await Promise.race([
        worker.close().then(() => 'closed'),
        sleep(5_000).then(() => 'still closing after 5 s'),
      ]);
      expect(closed, 'close() with the hook still waiting').toBe('closed');
      expect(Date.now() - closedAt, 'close() gave the job graceMs').toBeGreaterThanOrEqual(290);
      await expect(outcome).resolves.toMatchObject({ status: 'released' });
      expect(events.filter((e) => e.event === 'released').map((e) => ('job' in e ? e.job : ''))).toEqual(['stuck']);
      expect(await s.client.get('stuck')).toMatchObject({ status: 'pending', attempts: 0, owner: null });
      expect(await s.receiver.journal()).toHaveLength(hook === 'beforeSend' ? 0 : 1);
    },
  );

  test('process() refuses what claim() did not answer, naming it, before anything runs', async () => {
    const s = await setup();
    const { worker } = s.worker();
    let ran = false;
    const handler = async () => (ran = true);
    await expect(worker.process(null as never, handler)).rejects.toThrow(
      new TypeError(
        'process takes a claimed lease, as claim() answers it, not null (claim() answers null when no job is claimable).',
      ),
    );
    await expect(worker.process({ lease: { id: 'x' } } as never, handler)).rejects.toThrow(
      'process takes a claimed lease, as claim() answers it, not {"lease":{"id":"x"}}.',
    );
    expect(ran).toBe(false);
  });
});
