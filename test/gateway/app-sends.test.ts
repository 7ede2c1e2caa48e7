// POST /sends through supertest, in front of a REAL queue and a REAL receiver: several sends in
// one request, each answered with the status and body its own POST /send would have had (the
// current ones applied or duplicate, the stale, cancelled, unknown and mismatched refused, none
// of those reaching the receiver), their lease checks and forwards sharing requests; a bad send
// refuses the whole request and nothing is checked or forwarded.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import request from 'supertest';
import { describe, expect, test } from 'vitest';
import { parseMetrics } from '../helpers/metrics.js';
import { collectWarnings } from '../helpers/warnings.js';
import { expectError, setup, type Setup } from './setup.js';

type Send = { jobId: string; owner: string; token: number; to?: string; key?: string; qty?: number; body?: unknown };
type Result = { status: number; attempts: number; body: { outcome?: string; error?: Record<string, unknown> } };

async function counters(s: Setup) {
  const scrape = parseMetrics((await request(s.app).get('/metrics')).text);
  const receiver = parseMetrics(await (await fetch(`${s.receiver.url}/metrics`)).text());
  const queue = parseMetrics(await (await fetch(`${s.queue.url}/metrics`)).text());
  const route = (m: typeof queue, path: string) =>
    m
      .series('leasehold_http_requests_total')
      .filter(({ labels }) => labels.method === 'POST' && labels.route === path)
      .reduce((sum, { value }) => sum + value, 0);
  return {
    forwards: scrape.value('leasehold_gateway_forward_requests_total', { downstream: 'receiver' }),
    receiverPosts: route(receiver, '/effects'),
    leaseChecks: route(queue, '/jobs/:id/verify') + route(queue, '/verifications'),
  };
}

describe('POST /sends', () => {
  test('each send is answered as its own POST /send would be; only the current ones reach the receiver', async () => {
    const s = await setup();
    const a = await s.leased('a', 2);
    const b = await s.leased('b', 3);
    const stale = await s.leased('stale', 1);
    const cancelled = await s.leased('cancelled', 1);
    await s.queueClient.cancel('cancelled', { reason: 'withdrawn' });
    // b's effect is applied once before the batch: in it, b is a duplicate.
    expect((await request(s.app).post('/send').send({ jobId: 'b', owner: 'w1', token: b.token, qty: 3 })).status).toBe(
      200,
    );
    const before = await counters(s);

    const sends: Send[] = [
      { jobId: 'a', owner: 'w1', token: a.token, qty: 2 },
      { jobId: 'b', owner: 'w1', token: b.token, qty: 3 },
      { jobId: 'stale', owner: 'w1', token: stale.token + 1, qty: 1 },
      { jobId: 'cancelled', owner: 'w1', token: cancelled.token, qty: 1 },
      { jobId: 'nobody', owner: 'w1', token: 1, qty: 1 },
      { jobId: 'a', owner: 'w1', token: a.token, to: 'nowhere', qty: 2 },
      { jobId: 'stale', owner: 'w1', token: stale.token, qty: 9 },
      { jobId: 'a', owner: 'w1', token: a.token, key: 'receipt', body: { to: 'ops@example.com' } },
    ];
    const res = await request(s.app).post('/sends').send({ sends });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const after = await counters(s);
    const results = res.body.results as Result[];
    expect(
      results.map((r) => [r.status, r.body.outcome ?? r.body.error?.code]),
      JSON.stringify(results),
    ).toEqual([
      [200, 'applied'],
      [200, 'duplicate'],
      [409, 'stale_lease'],
      [409, 'stale_lease'],
      [404, 'unknown_job'],
      [400, 'unknown_downstream'],
      [422, 'qty_mismatch'],
      [200, 'applied'],
    ]);
    expect(results[0]).toMatchObject({ attempts: 1, body: { effect: { jobId: 'a', qty: 2, token: a.token } } });
    expect(results[2]!.body.error).toMatchObject({ reason: 'token_mismatch' });

    // Each refusal is the very answer the single route gives the same send.
    for (const i of [2, 3, 4, 5, 6]) {
      const single = await request(s.app).post('/send').send(sends[i]!);
      expect({ send: sends[i], status: single.status, error: single.body.error }).toEqual({
        send: sends[i],
        status: results[i]!.status,
        error: results[i]!.body.error,
      });
    }

    // Only a's two effects and b's first reached the receiver; nothing of the refused sends.
    const effects = await s.receiver.effects();
    expect(effects.map((e) => [e.jobId, e.key ?? null]).sort()).toEqual([
      ['a', null],
      ['a', 'receipt'],
      ['b', null],
    ]);
    expect(await s.receiver.totals()).toEqual({ effects: 3, qty: 5 });
    // Eight sends: their lease checks in one queue request, their three forwards (the receiver offered batches in its answer to b's first send) in one receiver request.
    expect(after.leaseChecks - before.leaseChecks, 'lease check requests for the batch').toBe(1);
    expect(after.forwards - before.forwards, 'forward requests for the batch').toBe(1);
    expect(after.receiverPosts - before.receiverPosts).toBe(after.forwards - before.forwards);
  });

  test('the same effect twice in one batch is applied once and recognised once', async () => {
    const s = await setup();
    const lease = await s.leased('j', 4);
    const send = { jobId: 'j', owner: 'w1', token: lease.token, qty: 4 };
    const res = await request(s.app)
      .post('/sends')
      .send({ sends: [send, send] });
    expect((res.body.results as Result[]).map((r) => r.body.outcome).sort()).toEqual(['applied', 'duplicate']);
    expect(await s.receiver.totals()).toEqual({ effects: 1, qty: 4 });
  });

  test('a batch of 20 sends, checked, forwarded singly, in a batch and retried, adds no MaxListenersExceededWarning', async () => {
    const warnings = collectWarnings('MaxListenersExceededWarning');
    const s = await setup();
    const batchOf = async (prefix: string) => {
      const sends: Send[] = [];
      for (let i = 0; i < 20; i += 1) {
        const lease = await s.leased(`${prefix}${i}`, 1);
        sends.push({ jobId: lease.id, owner: 'w1', token: lease.token, qty: 1 });
      }
      const res = await request(s.app).post('/sends').send({ sends });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      return (res.body.results as Result[]).map((r) => [r.body.outcome ?? r.body.error?.code, r.attempts]);
    };
    const applied = (attempts: number) => Array.from({ length: 20 }, () => ['applied', attempts]);
    // The gateway does not know yet that the receiver takes batches: 20 single forwards at once.
    expect(await batchOf('single-')).toEqual(applied(1));
    // Now it does: the 20 go in one batch request.
    expect(await batchOf('batched-')).toEqual(applied(1));
    // The batch fails: each send waits out its backoff, checks its lease again and retries alone.
    s.receiver.faults.fail({ status: 503, count: 1 });
    expect(await batchOf('retried-')).toEqual(applied(2));
    // Warnings are emitted on a later tick.
    await new Promise((resolve) => setImmediate(resolve));
    expect(warnings, 'MaxListenersExceededWarning emitted while POST /sends ran').toEqual([]);
    expect(await s.receiver.totals()).toEqual({ effects: 60, qty: 60 });
  });

  test('a downstream that refuses connections and a queue that is gone: each send answers as its own would', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const { port } = closed.address() as AddressInfo;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const s = await setup({
      gateway: { downstreams: { down: { url: `http://127.0.0.1:${port}/effects` } }, retryBudgetMs: 5_000 },
    });
    const a = await s.leased('a', 1);
    const b = await s.leased('b', 1);
    const res = await request(s.app)
      .post('/sends')
      .send({
        sends: [
          { jobId: 'a', owner: 'w1', token: a.token, to: 'down', key: 'k', qty: 1 },
          { jobId: 'b', owner: 'w1', token: b.token, qty: 1 },
        ],
      });
    const results = res.body.results as Result[];
    expect(results.map((r) => [r.status, r.attempts, r.body.outcome ?? r.body.error?.code])).toEqual([
      [502, 3, 'upstream_unavailable'],
      [200, 1, 'applied'],
    ]);
    expect(results[0]!.body.error).toMatchObject({ downstream: 'down' });

    await s.queue.close();
    const gone = await request(s.app)
      .post('/sends')
      .send({
        sends: [
          { jobId: 'b', owner: 'w1', token: b.token, qty: 1 },
          { jobId: 'a', owner: 'w1', token: a.token, qty: 1 },
        ],
      });
    expect((gone.body.results as Result[]).map((r) => [r.status, r.body.error?.code])).toEqual([
      [503, 'queue_unavailable'],
      [503, 'queue_unavailable'],
    ]);
    // Nothing more reached the receiver than b's one effect.
    expect(await s.receiver.totals()).toEqual({ effects: 1, qty: 1 });
  });

  test.each([
    [
      'a send with token 0',
      {
        sends: [
          { jobId: 'a', owner: 'w1', token: 1, qty: 2 },
          { jobId: 'a', owner: 'w1', token: 0, qty: 2 },
        ],
      },
      'sends.1.token',
    ],
    ['a send without qty or body', { sends: [{ jobId: 'a', owner: 'w1', token: 1 }] }, 'sends.0.qty'],
    [
      'a send with an unknown field',
      { sends: [{ jobId: 'a', owner: 'w1', token: 1, qty: 2, tokn: 1 }] },
      'unknown field "tokn"',
    ],
    ['no sends', { sends: [] }, 'sends must not be empty'],
    [
      '101 sends',
      { sends: Array.from({ length: 101 }, () => ({ jobId: 'a', owner: 'w1', token: 1, qty: 2 })) },
      'at most 100',
    ],
    ['no sends field', {}, 'sends'],
    [
      'an unknown field beside sends',
      { sends: [{ jobId: 'a', owner: 'w1', token: 1, qty: 2 }], all: true },
      'unknown field "all"',
    ],
    ['sends that is not an array', { sends: { jobId: 'a' } }, 'sends must be an array'],
  ])(
    '%s: 400 invalid_request for the whole request, and nothing is checked or forwarded',
    async (_what, body, words) => {
      const s = await setup();
      await s.leased('a', 2);
      const before = await counters(s);
      const res = await request(s.app).post('/sends').send(body);
      expectError(res, 400, 'invalid_request');
      expect(res.body.error.message).toContain(words);
      expect(await counters(s)).toEqual(before);
      expect(await s.receiver.effects()).toEqual([]);
    },
  );

  test('a body that is not JSON is 400, and GET /sends is 404 naming the routes', async () => {
    const s = await setup();
    const broken = await request(s.app).post('/sends').set('Content-Type', 'application/json').send('{"sends": [');
    expectError(broken, 400, 'invalid_request');
    const get = await request(s.app).get('/sends');
    expectError(get, 404, 'not_found');
    expect(get.body.error.message).toContain('POST /sends');
  });
});
