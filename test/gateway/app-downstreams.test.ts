// Named downstreams: a send's `to` picks where its effect is forwarded, with `key` and `body`,
// each downstream signed with its own secret over its own path; the default effect's qty is the
// job's, a keyed one's is the worker's; an unknown `to` sends nothing; an answer outside the
// protocol is 502 bad_downstream naming the downstream.
import nock from 'nock';
import request from 'supertest';
import { describe, expect, test } from 'vitest';
import { createGatewayApp } from '../../gateway/app.js';
import { resolveGatewayOptions } from '../../gateway/options.js';
import { verifySignature } from '../../receiver/signature.js';
import { parseMetrics } from '../helpers/metrics.js';
import { toyDownstream } from '../helpers/toy-downstream.js';
import { closeAfterTest, expectError, setup } from './setup.js';
import { interceptDownstreams } from './nock.js';

interceptDownstreams();

async function twoDownstreams(secrets: { billing?: string; mail?: string; gateway?: string } = {}) {
  const billing = await toyDownstream({
    path: '/hooks/effects',
    ...(secrets.billing ? { secret: secrets.billing } : {}),
  });
  const mail = await toyDownstream({
    ...(secrets.mail ? { secret: secrets.mail } : secrets.gateway ? { secret: secrets.gateway } : {}),
  });
  const s = await setup({
    gateway: {
      ...(secrets.gateway ? { secret: secrets.gateway } : {}),
      downstreams: {
        billing: { url: billing.url, ...(secrets.billing ? { secret: secrets.billing } : {}) },
        mail: { url: mail.url },
      },
    },
    ...(secrets.gateway ? { receiverSecret: secrets.gateway } : {}),
  });
  return { ...s, billing, mail };
}

const send = (app: Parameters<typeof request>[0], body: object) => request(app).post('/send').send(body);

describe('POST /send with to, key and body', () => {
  test('one job, three effects: the default one to the receiver, keyed ones with bodies to two downstreams', async () => {
    const s = await twoDownstreams();
    const lease = await s.leased('job-1', 5);
    const who = { jobId: 'job-1', owner: 'w1', token: lease.token };
    const charge = { amount: 1250, currency: 'EUR', customer: 'c-7' };

    const results = await Promise.all([
      send(s.app, { ...who, qty: 5 }),
      send(s.app, { ...who, to: 'billing', key: 'charge', qty: 1250, body: charge }),
      send(s.app, { ...who, to: 'mail', key: 'receipt', body: { to: 'c-7@example.com' } }),
    ]);
    expect(results.map((r) => [r.status, r.body.outcome])).toEqual([
      [200, 'applied'],
      [200, 'applied'],
      [200, 'applied'],
    ]);
    expect(await s.receiver.effects()).toEqual([
      expect.objectContaining({ jobId: 'job-1', qty: 5, token: lease.token }),
    ]);
    // Exactly the fields the send gave, in the protocol's order, stamped with the verified token.
    expect(s.billing.requests.map((r) => [r.path, r.headers['fencing-token'], r.body])).toEqual([
      ['/hooks/effects', String(lease.token), { jobId: 'job-1', key: 'charge', qty: 1250, body: charge }],
    ]);
    expect(s.mail.requests.map((r) => r.body)).toEqual([
      { jobId: 'job-1', key: 'receipt', body: { to: 'c-7@example.com' } },
    ]);
    expect(results[2]!.body.effect).toMatchObject({ jobId: 'job-1', key: 'receipt', body: { to: 'c-7@example.com' } });
  });

  test('the same keyed send again is a duplicate (Idempotent-Replayed), nothing added', async () => {
    const s = await twoDownstreams();
    const lease = await s.leased('job-1', 5);
    const body = { jobId: 'job-1', owner: 'w1', token: lease.token, to: 'billing', key: 'charge', qty: 3 };
    expect((await send(s.app, body)).body.outcome).toBe('applied');
    const again = await send(s.app, body);
    expect({
      status: again.status,
      outcome: again.body.outcome,
      replayed: again.headers['idempotent-replayed'],
    }).toEqual({ status: 200, outcome: 'duplicate', replayed: 'true' });
    expect(s.billing.applied).toHaveLength(1);
  });

  test("a keyed effect's qty is the worker's; the default effect's must be the job's, and is refused otherwise", async () => {
    const s = await twoDownstreams();
    const lease = await s.leased('job-1', 5);
    const who = { jobId: 'job-1', owner: 'w1', token: lease.token };
    expect((await send(s.app, { ...who, to: 'billing', key: 'charge', qty: 99 })).status).toBe(200);

    const wrong = await send(s.app, { ...who, to: 'billing', qty: 99 });
    expectError(wrong, 422, 'qty_mismatch');
    const none = await send(s.app, { ...who, body: { note: 'no qty' } });
    expectError(none, 422, 'qty_mismatch');
    expect(none.body.error).toMatchObject({ jobId: 'job-1', jobQty: 5 });
    expect(s.billing.requests).toHaveLength(1);
    expect(await s.receiver.journal()).toEqual([]);
  });

  test('an unknown to is 400 unknown_downstream: the queue is not asked, nothing is sent anywhere', async () => {
    const s = await twoDownstreams();
    const lease = await s.leased('job-1', 5);
    const res = await send(s.app, { jobId: 'job-1', owner: 'w1', token: lease.token, to: 'ledger', key: 'k', qty: 1 });
    expectError(res, 400, 'unknown_downstream');
    expect(res.body.error).toMatchObject({ to: 'ledger', downstreams: ['receiver', 'billing', 'mail'] });
    expect(res.body.error.message).toContain('--downstream ledger=URL');
    expect([s.billing.requests.length, s.mail.requests.length, (await s.receiver.journal()).length]).toEqual([0, 0, 0]);
    const scraped = parseMetrics((await request(s.app).get('/metrics')).text);
    expect(scraped.value('leasehold_gateway_lease_checks_total')).toBe(0);
    expect(scraped.value('leasehold_gateway_sends_total', { outcome: 'unknown_downstream' })).toBe(1);
    expect(scraped.series('leasehold_gateway_downstream_sends_total')).toEqual([]);
  });

  test.each([
    ['an empty key', { key: '', qty: 1 }, 'key must not be empty'],
    ['a key of 129 characters', { key: 'k'.repeat(129), qty: 1 }, 'at most 128'],
    ['a key that is not a string', { key: 7, qty: 1 }, 'key must be a string'],
    ['a key with NUL', { key: 'a\u0000b', qty: 1 }, 'NUL'],
    ['neither qty nor body', { key: 'k' }, 'qty is required'],
    ['qty 0 beside a body', { key: 'k', qty: 0, body: {} }, 'qty must be >= 1'],
    ['a body over 64 KiB', { key: 'k', body: 'x'.repeat(64 * 1024) }, 'at most 65536 bytes'],
    ['an empty to', { to: '', qty: 5 }, 'to must not be empty'],
  ])('%s is 400 invalid_request and sends nothing', async (_name, fields, phrase) => {
    const s = await twoDownstreams();
    const lease = await s.leased('job-1', 5);
    const res = await send(s.app, { jobId: 'job-1', owner: 'w1', token: lease.token, to: 'billing', ...fields });
    expectError(res, 400, 'invalid_request');
    expect(JSON.stringify(res.body)).toContain(phrase);
    expect(s.billing.requests).toEqual([]);
  });

  test("a body number beyond JSON's range (1e999) is 400 invalid_request naming where, and sends nothing", async () => {
    const s = await twoDownstreams();
    const lease = await s.leased('job-1', 5);
    const res = await request(s.app)
      .post('/send')
      .type('json')
      .send(
        `{"jobId": "job-1", "owner": "w1", "token": ${lease.token}, "to": "billing", "key": "k", "body": {"a": [1e999]}}`,
      );
    expectError(res, 400, 'invalid_request');
    expect(res.body.error.message).toContain(
      'body.a.0: a number beyond the range of a JSON number (it reads as Infinity)',
    );
    expect(s.billing.requests).toEqual([]);
  });

  test('a body of exactly 64 KiB serialized is forwarded', async () => {
    const s = await twoDownstreams();
    const lease = await s.leased('job-1', 5);
    const body = 'x'.repeat(64 * 1024 - 2); // the quotes make it 65536 bytes
    const res = await send(s.app, { jobId: 'job-1', owner: 'w1', token: lease.token, to: 'billing', key: 'k', body });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(s.billing.applied.map((e) => e.body)).toEqual([body]);
  });

  test("an old holder's keyed send is 409 stale_lease: nothing reaches the downstream", async () => {
    const s = await twoDownstreams();
    const old = await s.leased('job-1', 5, 'w1', 1_000);
    s.clock.advance(1_001);
    const next = await s.claim('w2');
    expect(next.token).toBeGreaterThan(old.token);
    const res = await send(s.app, { jobId: 'job-1', owner: 'w1', token: old.token, to: 'billing', key: 'k', qty: 1 });
    expectError(res, 409, 'stale_lease');
    expect(s.billing.requests).toEqual([]);
  });
});

describe('signatures per downstream', () => {
  test("each downstream's own secret, else the gateway's; v2 over that downstream's method and path", async () => {
    const s = await twoDownstreams({ billing: 'billing-secret', gateway: 'shared' });
    const lease = await s.leased('job-1', 5);
    const who = { jobId: 'job-1', owner: 'w1', token: lease.token };
    for (const [to, key] of [
      ['billing', 'charge'],
      ['mail', 'receipt'],
    ]) {
      const res = await send(s.app, { ...who, to, key, qty: 1 });
      expect({ to, status: res.status }, JSON.stringify(res.body)).toEqual({ to, status: 200 });
    }
    expect((await send(s.app, { ...who, qty: 5 })).status).toBe(200);

    const [charge] = s.billing.requests;
    const signed = {
      method: 'POST',
      path: '/hooks/effects',
      token: lease.token,
      body: JSON.stringify(charge!.body),
    };
    const header = charge!.headers['leasehold-signature'] as string;
    expect(verifySignature('billing-secret', header, signed, Date.now())).toEqual({ ok: true });
    expect(verifySignature('shared', header, signed, Date.now()).ok).toBe(false);
    expect(verifySignature('billing-secret', header, { ...signed, path: '/effects' }, Date.now()).ok).toBe(false);
  });

  test('a downstream whose secret differs: 502 upstream_rejected naming it and how to set its secret', async () => {
    const billing = await toyDownstream({ secret: 'right' });
    const s = await setup({ gateway: { downstreams: { billing: { url: billing.url, secret: 'wrong' } } } });
    const lease = await s.leased('job-1', 5);
    const res = await send(s.app, { jobId: 'job-1', owner: 'w1', token: lease.token, to: 'billing', key: 'k', qty: 1 });
    expectError(res, 502, 'upstream_rejected');
    expect(res.body.error).toMatchObject({ downstream: 'billing', attempts: 1, upstream: { status: 401 } });
    expect(res.body.error.message).toContain('LEASEHOLD_SECRET_BILLING');
    expect(billing.applied).toEqual([]);
  });
});

describe('a downstream answering outside the protocol', () => {
  test.each([
    ['200 without an outcome', 200, { ok: true }],
    ['201 with outcome "duplicate"', 201, { outcome: 'duplicate', effect: { jobId: 'job-1' } }],
    ['201 applied without the effect', 201, { outcome: 'applied' }],
    ['404 (not an effect endpoint)', 404, 'Not Found'],
    ['409 that is not fenced', 409, { error: { code: 'busy' } }],
  ])('%s: 502 bad_downstream naming it, not retried, never applied', async (_name, status, body) => {
    const billing = await toyDownstream({ path: '/fx' });
    const s = await setup({ gateway: { downstreams: { billing: { url: billing.url } }, retryAttempts: 3 } });
    const lease = await s.leased('job-1', 5);
    const scope = nock(new URL(billing.url).origin).post('/fx').reply(status, body);
    const res = await send(s.app, { jobId: 'job-1', owner: 'w1', token: lease.token, to: 'billing', key: 'k', qty: 1 });
    expectError(res, 502, 'bad_downstream');
    expect(res.body.error).toMatchObject({ downstream: 'billing', attempts: 1, upstream: { status } });
    expect(res.body.error.message).toContain('Downstream "billing"');
    expect(res.body.error.message).toContain('--downstream billing');
    expect(scope.isDone()).toBe(true);
    const scraped = parseMetrics((await request(s.app).get('/metrics')).text);
    expect(
      scraped.value('leasehold_gateway_downstream_sends_total', { downstream: 'billing', outcome: 'bad_downstream' }),
    ).toBe(1);
    expect(scraped.value('leasehold_gateway_sends_total', { outcome: 'applied' })).toBe(0);
  });
});

describe('metrics by downstream', () => {
  test('sends are counted by downstream and outcome', async () => {
    const s = await twoDownstreams();
    const lease = await s.leased('job-1', 5);
    const who = { jobId: 'job-1', owner: 'w1', token: lease.token };
    await send(s.app, { ...who, qty: 5 });
    await send(s.app, { ...who, to: 'billing', key: 'a', qty: 1 });
    await send(s.app, { ...who, to: 'billing', key: 'a', qty: 1 });
    await send(s.app, { ...who, to: 'billing', key: 'a', qty: 2 });
    const scraped = parseMetrics((await request(s.app).get('/metrics')).text);
    const by = (downstream: string, outcome: string) =>
      scraped.value('leasehold_gateway_downstream_sends_total', { downstream, outcome });
    expect({
      receiverApplied: by('receiver', 'applied'),
      billingApplied: by('billing', 'applied'),
      billingDuplicate: by('billing', 'duplicate'),
      billingConflict: by('billing', 'conflict'),
      mailApplied: by('mail', 'applied'),
      allApplied: scraped.value('leasehold_gateway_sends_total', { outcome: 'applied' }),
    }).toEqual({
      receiverApplied: 1,
      billingApplied: 1,
      billingDuplicate: 1,
      billingConflict: 1,
      mailApplied: 0,
      allApplied: 2,
    });
  });
});

describe('downstream options', () => {
  const base = { queueUrl: 'http://127.0.0.1:1' };
  test.each([
    [{ downstreams: { '9lives': { url: 'http://127.0.0.1:2/e' } } }, 'name must be a letter'],
    [{ downstreams: { billing: { url: 'ftp://127.0.0.1/e' } } }, 'downstreams.billing must be an http:// URL'],
    [{ downstreams: { 'a-b': { url: 'http://x/e' }, a_b: { url: 'http://y/e' } } }, 'LEASEHOLD_SECRET_A_B'],
    [{ receiverUrl: 'http://x', downstreams: { receiver: { url: 'http://y/e' } } }, 'give one of them'],
    [{ downstreams: { billing: { url: 'http://x/e', secret: '' } } }, 'must not be empty'],
    [{}, 'receiverUrl is required, or at least one of downstreams'],
  ])('%j is refused: %s', (options, phrase) => {
    expect(() => resolveGatewayOptions({ ...base, ...options })).toThrow(phrase);
  });

  test('downstreams alone, without a receiver: a send without to is unknown_downstream', async () => {
    const billing = await toyDownstream();
    const app = createGatewayApp({ ...base, downstreams: { billing: { url: billing.url } } });
    closeAfterTest(() => app.close());
    const res = await send(app, { jobId: 'j', owner: 'w1', token: 1, qty: 1 });
    expectError(res, 400, 'unknown_downstream');
    expect(res.body.error).toMatchObject({ to: 'receiver', downstreams: ['billing'] });
  });
});
