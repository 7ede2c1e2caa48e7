// A handler's several effects: `ctx.send(qty)` as before, `ctx.send({to, key, qty, body})` for any
// effect at any downstream the gateway has, each fenced by the lease the handler runs under — a
// lease lost between two effects stops the second at the worker, and a stalled send that wakes
// after a takeover is refused by the gateway, whichever downstream it was for.
import { describe, expect, test } from 'vitest';
import { startGateway } from '../../gateway/service.js';
import type { Lease } from '../../queue/types.js';
import { LeaseLostError } from '../../worker/index.js';
import { toyDownstream } from '../helpers/toy-downstream.js';
import { closeAfterTest, setup, timeline } from './setup.js';

async function withDownstreams() {
  const s = await setup();
  const billing = await toyDownstream({ path: '/billing/effects' });
  const mail = await toyDownstream({ path: '/mail/effects' });
  const gateway = await startGateway({
    queueUrl: s.queue.url,
    receiverUrl: s.receiver.url,
    downstreams: { billing: { url: billing.url }, mail: { url: mail.url } },
  });
  closeAfterTest(() => gateway.close());
  return { ...s, billing, mail, gatewayUrl: gateway.url };
}

describe('ctx.send with several effects', () => {
  test('three effects under one lease: the default one, a keyed charge with a body, a mail with a body only', async () => {
    const s = await withDownstreams();
    await s.client.enqueue({ id: 'order-1', qty: 2 });
    const { worker, events } = s.worker({ gatewayUrl: s.gatewayUrl });
    const charge = { cents: 1250, currency: 'EUR' };

    const outcome = await worker.process((await worker.claim())!, async (ctx) => {
      const sent = [
        await ctx.send(),
        await ctx.send({ to: 'billing', key: 'charge', qty: 1250, body: charge }),
        await ctx.send({ to: 'mail', key: 'receipt', body: { to: 'c@example.com' } }),
      ];
      return sent.map((s) => s.outcome);
    });

    expect(outcome).toMatchObject({ status: 'finished', result: ['applied', 'applied', 'applied'] });
    expect(await s.receiver.effects()).toEqual([expect.objectContaining({ jobId: 'order-1', qty: 2, token: 1 })]);
    expect(s.billing.requests.map((r) => [r.headers['fencing-token'], r.body])).toEqual([
      ['1', { jobId: 'order-1', key: 'charge', qty: 1250, body: charge }],
    ]);
    expect(s.mail.requests.map((r) => r.body)).toEqual([
      { jobId: 'order-1', key: 'receipt', body: { to: 'c@example.com' } },
    ]);
    const sent = events.filter((e) => e.event === 'sent');
    expect(sent.map((e) => [e.to, e.key, e.qty])).toEqual([
      [undefined, undefined, 2],
      ['billing', 'charge', 1250],
      ['mail', 'receipt', undefined],
    ]);
  });

  test("ctx.send(qty) and ctx.send({body}) are the job's default effect: the job's qty unless given", async () => {
    const s = await withDownstreams();
    await s.client.enqueue({ id: 'order-2', qty: 3 });
    const { worker } = s.worker({ gatewayUrl: s.gatewayUrl });
    const outcome = await worker.process((await worker.claim())!, async (ctx) => [
      (await ctx.send(3)).outcome,
      (await ctx.send({ to: 'billing', body: { note: 'default effect' } })).outcome,
    ]);
    expect(outcome).toMatchObject({ status: 'finished', result: ['applied', 'applied'] });
    expect(s.billing.requests.map((r) => r.body)).toEqual([
      { jobId: 'order-2', qty: 3, body: { note: 'default effect' } },
    ]);
  });

  test('a lease lost between two effects: the second never leaves the worker, for any downstream', async () => {
    const s = await withDownstreams();
    await s.client.enqueue({ id: 'order-3', qty: 1 });
    const { worker, events } = s.worker({ gatewayUrl: s.gatewayUrl, leaseMs: 900 });
    let second: unknown;
    const outcome = await worker.process((await worker.claim())!, async (ctx) => {
      await ctx.send({ to: 'billing', key: 'charge', qty: 1 });
      await s.takeOver('order-3');
      await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve, { once: true }));
      second = await ctx.send({ to: 'mail', key: 'receipt', body: {} }).catch((err: unknown) => err);
      return 'finished anyway';
    });
    expect(outcome.status).toBe('lost');
    expect(second).toBeInstanceOf(LeaseLostError);
    expect([s.billing.requests.length, s.mail.requests.length]).toEqual([1, 0]);
    expect(timeline(events, 'order-3')).toContain('refused:renew');
  });

  test('a send stalled past a takeover is refused by the gateway (409 stale_lease): nothing reaches its downstream', async () => {
    const s = await withDownstreams();
    await s.client.enqueue({ id: 'order-4', qty: 1 });
    let thief: Lease | undefined;
    const { worker, events } = s.worker({
      gatewayUrl: s.gatewayUrl,
      leaseMs: 60_000,
      hooks: {
        // After the worker's own look at its lease, before the request leaves: the job changes hands.
        beforeSend: async () => {
          thief = await s.takeOver('order-4');
        },
      },
    });
    let late: unknown;
    const outcome = await worker.process((await worker.claim())!, async (ctx) => {
      late = await ctx.send({ to: 'billing', key: 'charge', qty: 1 }).catch((err: unknown) => err);
      return 'done';
    });
    expect(thief?.token).toBe(2);
    expect(late).toBeInstanceOf(LeaseLostError);
    expect(late).toMatchObject({ during: 'send', current: { owner: 'thief', token: 2 } });
    expect(outcome.status).toBe('lost');
    expect(s.billing.requests).toEqual([]);
    expect(events.find((e) => e.event === 'refused' && e.op === 'send')).toMatchObject({ code: 'stale_lease' });
  });

  // A misspelt field would be dropped, and the job's one default effect sent in place of the keyed one.
  test('a send of a field it does not know, or of neither a number nor an object, is refused before it leaves', async () => {
    const s = await withDownstreams();
    await s.client.enqueue({ id: 'order-5', qty: 3 });
    const { worker } = s.worker({ gatewayUrl: s.gatewayUrl });
    const refusals: unknown[] = [];
    const outcome = await worker.process((await worker.claim())!, async (ctx) => {
      for (const input of [{ to: 'billing', keyy: 'charge', body: 1 }, { key: 'k', qtyy: 3 }, '3', null, [1]]) {
        refusals.push(await ctx.send(input as never).catch((err: unknown) => err));
      }
      return 'checked';
    });
    expect(refusals.map((err) => [(err as Error).name, (err as Error).message])).toEqual([
      ['RangeError', 'ctx.send does not take "keyy" (did you mean key?); its options are to, key, qty, body.'],
      ['RangeError', 'ctx.send does not take "qtyy" (did you mean qty?); its options are to, key, qty, body.'],
      ['TypeError', 'ctx.send takes a qty (a number) or {to?, key?, qty?, body?}, not "3".'],
      ['TypeError', 'ctx.send takes a qty (a number) or {to?, key?, qty?, body?}, not null.'],
      ['TypeError', 'ctx.send takes a qty (a number) or {to?, key?, qty?, body?}, not [1].'],
    ]);
    expect(outcome).toMatchObject({ status: 'finished', result: 'checked' });
    expect([await s.receiver.effects(), s.billing.requests, s.mail.requests]).toEqual([[], [], []]);
  });
});

describe('ctx.send with a body that is not a JSON value', () => {
  // JSON.stringify would send each of these changed, without a word: the downstream would record
  // what the handler never meant, for good.
  test('is refused with a TypeError naming where in the body, and nothing is sent', async () => {
    const s = await withDownstreams();
    await s.client.enqueue({ id: 'order-6', qty: 1 });
    const { worker } = s.worker({ gatewayUrl: s.gatewayUrl });
    const cycle: Record<string, unknown> = { name: 'loop' };
    cycle.self = cycle;
    const bodies: Array<[unknown, string]> = [
      [{ f: () => 1 }, 'body.f is a function, which JSON leaves out'],
      [NaN, 'body is NaN, which JSON writes as null'],
      [{ total: [1, -Infinity] }, 'body.total[1] is -Infinity, which JSON writes as null'],
      [10n, 'body is a BigInt (10n), which JSON cannot hold: give it as a string or a number'],
      [
        { items: [{}, {}, { when: new Date(0) }] },
        'body.items[2].when is a Date, which JSON writes as a string: give date.toISOString() or date.getTime()',
      ],
      [[1, undefined], 'body[1] is undefined, which JSON writes as null in an array'],
      [{ 'two words': new Map() }, 'body["two words"] is a Map, not a plain object or an array'],
      [new Set([1]), 'body is a Set, not a plain object or an array'],
      [{ s: Symbol('s') }, 'body.s is a symbol, which JSON leaves out'],
      [cycle, 'body.self is body again (a cycle), which JSON cannot hold'],
    ];
    const refusals: unknown[] = [];
    const outcome = await worker.process((await worker.claim())!, async (ctx) => {
      for (const [body] of bodies) {
        refusals.push(await ctx.send({ to: 'billing', key: 'charge', body }).catch((err: unknown) => err));
      }
      return 'checked';
    });
    expect(refusals.map((err) => [(err as Error).name, (err as Error).message])).toEqual(
      bodies.map(([, where]) => ['TypeError', `ctx.send's body must be a JSON value, but ${where}. Nothing was sent.`]),
    );
    expect(outcome).toMatchObject({ status: 'finished', result: 'checked' });
    expect(s.billing.requests, 'requests that reached the downstream').toEqual([]);
  });

  test('a JSON value is sent as it is; a property set to undefined is left out, as JSON leaves it', async () => {
    const s = await withDownstreams();
    await s.client.enqueue({ id: 'order-7', qty: 1 });
    const { worker } = s.worker({ gatewayUrl: s.gatewayUrl });
    const bare = Object.create(null) as Record<string, unknown>;
    bare.plain = true;
    const body = { note: undefined, lines: [null, -1.5, 'x', false, { n: 0 }], bare, shared: [bare, bare] };
    const outcome = await worker.process((await worker.claim())!, async (ctx) => {
      return (await ctx.send({ to: 'billing', key: 'charge', body })).outcome;
    });
    expect(outcome).toMatchObject({ status: 'finished', result: 'applied' });
    expect(s.billing.requests.map((r) => r.body)).toEqual([
      {
        jobId: 'order-7',
        key: 'charge',
        body: {
          lines: [null, -1.5, 'x', false, { n: 0 }],
          bare: { plain: true },
          shared: [{ plain: true }, { plain: true }],
        },
      },
    ]);
  });
});
