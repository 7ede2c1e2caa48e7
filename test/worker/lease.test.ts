// The worker client against the real queue, gateway and receiver: a long handler keeps its
// lease, a lost lease ends as LeaseLostError with nothing accepted under it, a refused finish
// is a loss, a finish without an answer past its lease is retried until the queue says whether
// it landed, a throwing handler fails the job (a fail whose answer was lost counted by what landed).
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, test } from 'vitest';
import { GatewayError } from '../../gateway/errors.js';
import { QueueError } from '../../queue/errors.js';
import { LeaseLostError, type JobContext, type QueueApi } from '../../worker/index.js';
import { finishOutlivedLease } from './finish-kit.js';
import { queueProxy } from './proxy.js';
import { eventually, setup, timeline } from './setup.js';

describe('a handler that runs longer than its lease', () => {
  test('is kept alive by heartbeats: the finish is accepted and exactly one effect is applied', async () => {
    const s = await setup();
    await s.client.enqueue({ id: 'long', qty: 4 });
    // Leases of 1.5 s renewed every 500 ms: a loaded machine may delay a renewal by a second.
    const { worker, events } = s.worker({ leaseMs: 1_500 });

    const claimed = await worker.claim();
    expect(claimed?.lease).toMatchObject({ id: 'long', token: 1, owner: 'w1' });
    const started = Date.now();
    const outcome = await worker.process(claimed!, async (ctx) => {
      await sleep(4_500, undefined, { signal: ctx.signal }); // three leases long
      await ctx.stage('sending');
      return (await ctx.send()).outcome;
    });

    expect(Date.now() - started).toBeGreaterThanOrEqual(4_500);
    expect(outcome).toMatchObject({
      status: 'finished',
      result: 'applied',
      job: { status: 'done', owner: 'w1', token: 1 },
    });
    const renewals = events.filter((e) => e.event === 'renewed');
    // Every 500 ms over 4.5 s: about nine; a loaded machine may skip a few.
    expect(renewals.length).toBeGreaterThanOrEqual(5);
    expect(renewals.at(-1)!.leaseUntil).toBeGreaterThan(claimed!.lease.leaseUntil + 2_500);
    expect(timeline(events).filter((e) => e !== 'renewed')).toEqual(['claimed', 'renewed:sending', 'sent', 'finished']);
    expect(await s.receiver.effects()).toEqual([expect.objectContaining({ jobId: 'long', qty: 4, token: 1 })]);
  });
});

describe('a send renews the lease first only when the lease is short', () => {
  test('on a fresh lease the send goes out without a renewal', async () => {
    const s = await setup();
    await s.client.enqueue({ id: 'fresh', qty: 2 });
    // Renewed every 1 s: a send is short of lease only if 2 s went by without one.
    const { worker, events } = s.worker({ leaseMs: 3_000 });

    const outcome = await worker.process((await worker.claim())!, async (ctx) => (await ctx.send()).outcome);

    expect(outcome).toMatchObject({ status: 'finished', result: 'applied' });
    expect(timeline(events, 'fresh').filter((e) => e !== 'renewed')).toEqual(['claimed', 'sent', 'finished']);
  });

  test('on a lease with less left than an interval and a send, the send renews first', async () => {
    const s = await setup();
    await s.client.enqueue({ id: 'short', qty: 3 });
    const { worker, events } = s.worker({ leaseMs: 6_000 });
    const claimed = (await worker.claim())!;
    // The worker's estimate counts from when the claim was sent: 4.5 s ago leaves 1.5 s, under
    // the 2 s interval. The queue, which claimed just now, still holds the lease for 6 s.
    const aged = { ...claimed, claimedAt: claimed.claimedAt - 4_500 };

    const outcome = await worker.process(aged, async (ctx) => (await ctx.send()).outcome);

    expect(outcome).toMatchObject({ status: 'finished', result: 'applied' });
    // The keeper's renewal, before the send; its timer's first one would be due only after 2 s.
    expect(timeline(events, 'short')).toEqual(['claimed', 'renewed', 'sent', 'finished']);
    const renewal = events.find((e) => e.event === 'renewed');
    expect(renewal).not.toHaveProperty('stage');
    expect((renewal as { leaseUntil: number }).leaseUntil).toBeGreaterThan(claimed.lease.leaseUntil);
  });

  test('a beforeSend hook that awaits does not stall the lease: the keeper renews meanwhile and the send counts', async () => {
    const s = await setup();
    await s.client.enqueue({ id: 'held-hook', qty: 4 });
    let renewalsDuringHook = -1;
    const { worker, events } = s.worker({
      leaseMs: 900,
      hooks: {
        // Over two leases long; the lease ends only if renewals stop (a clock the test moves).
        beforeSend: async () => {
          const before = events.filter((e) => e.event === 'renewed').length;
          await sleep(2_000);
          renewalsDuringHook = events.filter((e) => e.event === 'renewed').length - before;
        },
      },
    });
    const claimed = (await worker.claim())!;

    const outcome = await worker.process(claimed, async (ctx) => (await ctx.send()).outcome);

    expect(outcome).toMatchObject({ status: 'finished', result: 'applied', job: { status: 'done', token: 1 } });
    // Every 300 ms over 2 s: about six; a loaded machine may skip a few.
    expect(renewalsDuringHook).toBeGreaterThanOrEqual(3);
    expect(timeline(events, 'held-hook').filter((e) => e !== 'renewed')).toEqual(['claimed', 'sent', 'finished']);
    expect(await s.receiver.effects()).toEqual([expect.objectContaining({ jobId: 'held-hook', qty: 4, token: 1 })]);
  });
});

describe('a lease the worker cannot keep', () => {
  test('a renewal refused because another owner claimed after expiry: LeaseLostError, signal aborted, nothing accepted', async () => {
    const s = await setup();
    await s.client.enqueue({ id: 'taken', qty: 2 });
    const { worker, events } = s.worker({ leaseMs: 900 });
    let sendAfterLoss: unknown;
    let signal: AbortSignal | undefined;

    const outcome = await worker.process((await worker.claim())!, async (ctx) => {
      signal = ctx.signal;
      // The lease ends on the queue's clock and a second owner claims the job, under token 2.
      await s.takeOver('taken');
      await untilAborted(ctx, 10_000);
      sendAfterLoss = await ctx.send().catch((err: unknown) => err);
      return 'finished anyway';
    });

    expect(outcome.status).toBe('lost');
    const error = (outcome as { error: LeaseLostError }).error;
    expect(error).toBeInstanceOf(LeaseLostError);
    expect(error).toMatchObject({
      during: 'renew',
      reason: 'token_mismatch',
      expected: { owner: 'w1', token: 1 },
      current: { status: 'leased', owner: 'thief', token: 2 },
    });
    expect(signal?.aborted).toBe(true);
    expect(signal?.reason).toBeInstanceOf(LeaseLostError);
    // The send after the loss never left the worker; the job was neither finished nor failed by it.
    expect(sendAfterLoss).toBeInstanceOf(LeaseLostError);
    expect(await s.receiver.journal()).toEqual([]);
    expect(await s.client.get('taken')).toMatchObject({ status: 'leased', owner: 'thief', token: 2, lastError: null });
    expect(timeline(events, 'taken')).toEqual(['claimed', 'refused:renew', 'lost']);
    // The new owner's token works as usual.
    await expect(s.client.finish('taken', { owner: 'thief', token: 2 })).resolves.toMatchObject({ status: 'done' });
  });

  test('renewals that cannot reach the queue: lost at the estimated end of the lease, signal aborted, nothing accepted', async () => {
    const s = await setup();
    await s.client.enqueue({ id: 'cut-off', qty: 3 });
    // A partition between this worker and the queue, for renewals only.
    const partitioned: QueueApi = s.queueApi({
      heartbeat: async () => {
        throw new QueueError('queue_unavailable', 'The queue could not be reached: ECONNREFUSED.');
      },
    });
    const { worker, events } = s.worker({ leaseMs: 900, queue: partitioned });
    const claimedAt = Date.now();
    let abortedAfterMs = -1;
    let sendAfterLoss: unknown;

    const outcome = await worker.process((await worker.claim())!, async (ctx) => {
      await untilAborted(ctx, 10_000);
      abortedAfterMs = Date.now() - claimedAt;
      sendAfterLoss = await ctx.send().catch((err: unknown) => err);
    });

    expect(outcome).toMatchObject({ status: 'lost', error: { during: 'renew', reason: 'not_renewed' } });
    // Not before the lease could have ended, and not long after.
    expect(abortedAfterMs).toBeGreaterThanOrEqual(880);
    expect(abortedAfterMs).toBeLessThan(5_000);
    expect(sendAfterLoss).toBeInstanceOf(LeaseLostError);
    expect(events.filter((e) => e.event === 'call_failed').length).toBeGreaterThanOrEqual(2);
    expect(events.some((e) => e.event === 'finished' || e.event === 'failed' || e.event === 'sent')).toBe(false);
    expect(await s.receiver.journal()).toEqual([]);
    const job = await s.client.get('cut-off');
    expect(job).toMatchObject({ status: 'leased', owner: 'w1', token: 1, lastError: null });
  });

  test('a finish refused as stale is reported as LeaseLostError, not as done', async () => {
    const s = await setup();
    await s.client.enqueue({ id: 'late', qty: 5 });
    const { worker, events } = s.worker({
      leaseMs: 900,
      // Between the handler's return and the finish: the lease ends and the job is taken over.
      hooks: { beforeFinish: async (lease) => void (await s.takeOver(lease.id)) },
    });

    const outcome = await worker.process((await worker.claim())!, async (ctx) => {
      await ctx.stage('sending');
      return (await ctx.send()).outcome;
    });

    expect(outcome.status).toBe('lost');
    expect((outcome as { error: unknown }).error).toBeInstanceOf(LeaseLostError);
    expect(outcome).toMatchObject({
      error: {
        during: 'finish',
        reason: 'token_mismatch',
        expected: { owner: 'w1', token: 1 },
        current: { owner: 'thief', token: 2 },
      },
    });
    // A periodic renewal may fall between the send and the finish on a slow machine; it is not what this is about.
    const steps = timeline(events, 'late').filter((step) => step !== 'renewed');
    expect(steps).toEqual(['claimed', 'renewed:sending', 'sent', 'refused:finish', 'lost']);
    expect(events.find((e) => e.event === 'refused')).toMatchObject({ status: 409, code: 'stale_lease' });
    // Not done: the new owner holds it. Its send is a duplicate of w1's effect, not a second one.
    expect(await s.client.get('late')).toMatchObject({ status: 'leased', owner: 'thief', token: 2 });
    expect(await s.receiver.totals()).toEqual({ effects: 1, qty: 5 });
  });

  test('a send refused by the gateway as stale throws LeaseLostError from ctx.send; the job is neither finished nor failed', async () => {
    const s = await setup();
    await s.client.enqueue({ id: 'stale-send', qty: 6 });
    const { worker, events } = s.worker({
      leaseMs: 900,
      hooks: { beforeSend: async (lease) => void (await s.takeOver(lease.id)) },
    });
    let thrown: unknown;

    const outcome = await worker.process((await worker.claim())!, async (ctx) => {
      try {
        await ctx.send();
      } catch (err) {
        thrown = err;
        throw err;
      }
    });

    expect(thrown).toBeInstanceOf(LeaseLostError);
    expect(outcome).toMatchObject({
      status: 'lost',
      error: { during: 'send', reason: 'token_mismatch', current: { owner: 'thief', token: 2 } },
    });
    expect(events.find((e) => e.event === 'refused')).toMatchObject({ op: 'send', status: 409, code: 'stale_lease' });
    expect(await s.receiver.journal()).toEqual([]); // the gateway forwarded nothing
    expect(await s.client.get('stale-send')).toMatchObject({
      status: 'leased',
      owner: 'thief',
      token: 2,
      lastError: null,
    });
  });

  test('a send already past its lease check when the lease is lost still goes out, and its refusal is reported', async () => {
    const s = await setup();
    await s.client.enqueue({ id: 'in-flight', qty: 1 });
    let abortedWhenSent: boolean | undefined;
    let context: JobContext | undefined;
    const { worker, events } = s.worker({
      leaseMs: 900,
      hooks: {
        // A stall between the check and the request, long enough for a heartbeat to learn the loss.
        beforeSend: async (lease) => {
          await s.takeOver(lease.id);
          await eventually('the heartbeat to report the loss', () => (context?.lost ? true : undefined));
          abortedWhenSent = context!.signal.aborted;
        },
      },
    });

    const outcome = await worker.process((await worker.claim())!, async (ctx) => {
      context = ctx;
      await ctx.send();
    });

    expect(abortedWhenSent).toBe(false);
    expect(context!.signal.aborted).toBe(true);
    expect(outcome).toMatchObject({ status: 'lost', error: { reason: 'token_mismatch' } });
    expect(timeline(events, 'in-flight')).toEqual(['claimed', 'refused:renew', 'lost', 'refused:send']);
    expect(await s.receiver.journal()).toEqual([]);
  });
  test('a send that hangs when the lease is lost is aborted after sendGraceMs, so the handler stops waiting', async () => {
    const s = await setup();
    await s.client.enqueue({ id: 'hang', qty: 1 });
    let sendSignal: AbortSignal | undefined;
    const { worker, events } = s.worker({
      leaseMs: 900,
      sendGraceMs: 300,
      // A gateway that never answers, and renewals that never get through.
      gateway: {
        send: (_input, options) =>
          new Promise((_resolve, reject) => {
            sendSignal = options?.signal;
            options?.signal?.addEventListener('abort', () => reject(options.signal!.reason));
          }),
      },
      queue: s.queueApi({
        heartbeat: async () => {
          throw new QueueError('queue_unavailable', 'The queue could not be reached: ETIMEDOUT.');
        },
      }),
    });
    let sendError: unknown;
    let lostAt = 0;

    const outcome = await worker.process((await worker.claim())!, async (ctx) => {
      sendError = await ctx.send().catch((err: unknown) => err);
      lostAt = events.find((e) => e.event === 'lost')!.t;
    });

    expect(sendSignal?.aborted).toBe(true);
    expect(sendError).toBeInstanceOf(LeaseLostError);
    expect(outcome).toMatchObject({ status: 'lost', error: { reason: 'not_renewed' } });
    const aborted = events.find((e) => e.event === 'send_failed')!;
    expect(aborted).toMatchObject({ code: 'aborted' });
    expect(aborted.t - lostAt).toBeGreaterThanOrEqual(290);
    expect(aborted.t - lostAt).toBeLessThan(3_000);
  });
});

describe('a finish that gets no answer until its lease has run out', () => {
  test('its answer cut after the queue committed it, the retries finding the queue unreachable: finished once the queue answers again, not lost', async () => {
    const s = await setup();
    const proxy = await queueProxy(s.queue.url);
    await s.client.enqueue({ id: 'cut-finish', qty: 1 });
    // The queue commits the finish and its answer is cut; from then on the queue cannot be reached.
    const outage = proxy.cutAnswer('POST /jobs/:id/finish').then(() => proxy.unreachable());
    const { worker, events } = s.worker({ queueUrl: proxy.url, leaseMs: 900 });

    const running = worker.run(async () => 'ok', { maxJobs: 1 });
    await finishOutlivedLease(events, 'cut-finish');
    (await outage).restore();

    const summary = await running;
    const steps = timeline(events, 'cut-finish');
    expect(summary, `the run's summary (the job's timeline: ${steps.join(' ')})`).toEqual({
      claimed: 1,
      finished: 1,
      failed: 0,
      lost: 0,
      released: 0,
    });
    expect(steps.filter((step) => step !== 'call_failed')).toEqual(['claimed', 'finished']);
    expect(await s.client.get('cut-finish')).toMatchObject({ status: 'done', owner: 'w1', token: 1, result: 'ok' });
  });

  test('no attempt landed: once the queue answers again, the refusal is the loss (lease_expired), not finished', async () => {
    const s = await setup();
    const proxy = await queueProxy(s.queue.url);
    await s.client.enqueue({ id: 'never-landed', qty: 1 });
    const { worker, events } = s.worker({ queueUrl: proxy.url, leaseMs: 900 });
    const outage: { restore?: () => void } = {};

    const running = worker.run(
      async () => {
        // Unreachable from before the first finish.
        outage.restore = proxy.unreachable().restore;
        return 'ok';
      },
      { maxJobs: 1 },
    );
    await finishOutlivedLease(events, 'never-landed');
    outage.restore!();

    expect(await running).toEqual({ claimed: 1, finished: 0, failed: 0, lost: 1, released: 0 });
    expect(timeline(events, 'never-landed').filter((step) => step !== 'call_failed')).toEqual([
      'claimed',
      'refused:finish',
      'lost',
    ]);
    expect(events.find((e) => e.event === 'lost')).toMatchObject({ during: 'finish', reason: 'lease_expired' });
    expect(await s.client.get('never-landed')).toMatchObject({ status: 'leased', owner: 'w1', token: 1, result: null });
  });

  test('a queue that never answers again: the finish is given up once the grace after a stop is over, lost as queue_unreachable', async () => {
    const s = await setup();
    const proxy = await queueProxy(s.queue.url);
    await s.client.enqueue({ id: 'gone', qty: 1 });
    void proxy.cutAnswer('POST /jobs/:id/finish').then(() => proxy.unreachable());
    const { worker, events } = s.worker({ queueUrl: proxy.url, leaseMs: 900, graceMs: 200 });
    const stop = new AbortController();

    const running = worker.run(async () => 'ok', { maxJobs: 1, signal: stop.signal });
    await finishOutlivedLease(events, 'gone');
    stop.abort();

    expect(await running).toEqual({ claimed: 1, finished: 0, failed: 0, lost: 1, released: 0 });
    // Retried past the lease and through the grace after the stop; given up at its first attempt after that.
    expect(timeline(events).filter((step) => step !== 'call_failed')).toEqual([
      'started',
      'claimed',
      'stopping',
      'grace_over',
      'lost',
      'stopped',
    ]);
    const lost = events.find((e) => e.event === 'lost')!;
    expect(lost).toMatchObject({ during: 'finish', reason: 'queue_unreachable' });
    expect(lost.t - events.find((e) => e.event === 'grace_over')!.t).toBeLessThan(2_000);
  });
});

describe('a handler that throws', () => {
  test('fails the job with its message: back to pending with lastError, retried later', async () => {
    const s = await setup();
    await s.client.enqueue({ id: 'broken', qty: 1 });
    const { worker, events } = s.worker();
    const before = Date.now();

    const outcome = await worker.process((await worker.claim())!, async () => {
      throw new Error('printer on fire');
    });

    expect(outcome).toMatchObject({
      status: 'failed',
      error: 'printer on fire',
      job: { status: 'pending', lastError: 'printer on fire' },
    });
    const job = await s.client.get('broken');
    expect(job).toMatchObject({ status: 'pending', lastError: 'printer on fire', attempts: 1, owner: 'w1', token: 1 });
    expect(job.runAt).toBeGreaterThan(before);
    expect(timeline(events, 'broken')).toEqual(['claimed', 'failed']);
  });

  test("a send of a qty other than the job's: GatewayError qty_mismatch, not a lost lease; uncaught, it fails the job", async () => {
    const s = await setup();
    await s.client.enqueue({ id: 'wrong-qty', qty: 3 });
    const { worker, events } = s.worker();
    let thrown: unknown;

    const outcome = await worker.process((await worker.claim())!, async (ctx) => {
      try {
        await ctx.send(ctx.lease.qty + 2);
      } catch (err) {
        thrown = err;
        throw err;
      }
    });

    expect(thrown).toBeInstanceOf(GatewayError);
    expect(thrown).toMatchObject({
      code: 'qty_mismatch',
      status: 422,
      details: { jobId: 'wrong-qty', qty: 5, jobQty: 3 },
    });
    const message = (thrown as GatewayError).message;
    expect(outcome).toMatchObject({ status: 'failed', error: message, job: { status: 'pending', lastError: message } });
    expect(timeline(events, 'wrong-qty')).toEqual(['claimed', 'refused:send', 'failed']);
    const refused = events.find((e) => e.event === 'refused');
    expect(refused).toMatchObject({ op: 'send', status: 422, code: 'qty_mismatch' });
    expect(refused).not.toHaveProperty('reason');
    expect(await s.receiver.journal()).toEqual([]);
  });

  test('its fail committed and the answer cut: the retry finds the job failed under this lease, so it counts failed, not lost', async () => {
    const s = await setup();
    const proxy = await queueProxy(s.queue.url);
    await s.client.enqueue({ id: 'cut-fail', qty: 1 });
    const cut = proxy.cutAnswer('POST /jobs/:id/fail');
    const { worker, events } = s.worker({ queueUrl: proxy.url });

    const summary = await worker.run(
      () => {
        throw new Error('printer on fire');
      },
      { maxJobs: 1 },
    );
    await cut;

    const steps = timeline(events, 'cut-fail');
    expect(summary, `the run's summary (the job's timeline: ${steps.join(' ')})`).toEqual({
      claimed: 1,
      finished: 0,
      failed: 1,
      lost: 0,
      released: 0,
    });
    expect(steps).toEqual(['claimed', 'call_failed', 'failed']);
    expect(events.find((e) => e.event === 'failed')).toMatchObject({ error: 'printer on fire', status: 'pending' });
    expect(await s.client.get('cut-fail')).toMatchObject({
      status: 'pending',
      owner: 'w1',
      token: 1,
      attempts: 1,
      lastError: 'printer on fire',
    });
  });

  test('a fail refused because an operator cancelled the job meanwhile is lost, though the job keeps an identical error', async () => {
    const s = await setup();
    const proxy = await queueProxy(s.queue.url);
    await s.client.enqueue({ id: 'cancelled', qty: 1 });
    const { worker, events } = s.worker({ queueUrl: proxy.url });
    const outage: { restore?: () => void } = {};

    const running = worker.run(
      async () => {
        // Cancelled with the very error the handler is about to fail with; the fail's first attempt is cut.
        await s.client.cancel('cancelled', { reason: 'printer on fire' });
        outage.restore = proxy.unreachable().restore;
        throw new Error('printer on fire');
      },
      { maxJobs: 1 },
    );
    await eventually("the fail's first attempt to go unanswered", () =>
      events.some((e) => e.event === 'call_failed' && e.op === 'fail') ? true : undefined,
    );
    outage.restore!();

    const summary = await running;
    const steps = timeline(events, 'cancelled');
    expect(summary, `the run's summary (the job's timeline: ${steps.join(' ')})`).toMatchObject({ failed: 0, lost: 1 });
    expect(steps.filter((step) => step !== 'call_failed')).toEqual(['claimed', 'refused:fail', 'lost']);
    expect(await s.client.get('cancelled')).toMatchObject({
      status: 'dead',
      deadReason: 'cancelled',
      owner: 'w1',
      token: 1,
      lastError: 'printer on fire',
    });
  });

  test('on its last attempt the job is dead', async () => {
    const s = await setup();
    await s.client.enqueue({ id: 'once', qty: 1, maxAttempts: 1 });
    const { worker } = s.worker();

    const outcome = await worker.process((await worker.claim())!, () => {
      throw new Error('no luck');
    });

    expect(outcome).toMatchObject({
      status: 'failed',
      job: { status: 'dead', deadReason: 'attempts_exhausted', lastError: 'no luck' },
    });
  });
});

async function untilAborted(ctx: JobContext, timeoutMs: number): Promise<void> {
  await sleep(timeoutMs, undefined, { signal: ctx.signal }).catch(() => {});
  if (!ctx.signal.aborted) throw new Error(`the handler's signal was not aborted within ${timeoutMs} ms`);
}
