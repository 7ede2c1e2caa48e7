// GET /metrics on the gateway: sends by outcome, the retries behind them, the lease checks with
// the queue requests that carried them, and how long the gateway waited for its own requests.
import request from 'supertest';
import { describe, expect, test } from 'vitest';
import { parseMetrics } from '../helpers/metrics.js';
import { setup } from './setup.js';

describe('gateway metrics', () => {
  test('sends by outcome, retries, lease checks and their queue requests', async () => {
    const { app, leased, receiver } = await setup();
    const send = (body: object) => request(app).post('/send').send(body);
    const scrape = async () => parseMetrics((await request(app).get('/metrics').expect(200)).text);
    expect((await scrape()).value('leasehold_gateway_sends_total', { outcome: 'applied' })).toBe(0);

    const a = await leased('a', 3);
    expect((await send({ jobId: 'a', owner: a.owner, token: a.token, qty: 3 })).status).toBe(200);
    expect((await send({ jobId: 'a', owner: a.owner, token: a.token, qty: 3 })).status).toBe(200);
    expect((await send({ jobId: 'a', owner: a.owner, token: a.token + 1, qty: 3 })).status).toBe(409);
    expect((await send({ jobId: 'a', owner: a.owner, token: a.token, qty: 4 })).status).toBe(422);
    const b = await leased('b', 2);
    receiver.faults.fail({ status: 503 });
    const retried = await send({ jobId: 'b', owner: b.owner, token: b.token, qty: 2 });
    expect(retried.status).toBe(200);
    expect(retried.headers['leasehold-attempts']).toBe('2');

    const scraped = await scrape();
    const sends = (outcome: string) => scraped.value('leasehold_gateway_sends_total', { outcome });
    expect([sends('applied'), sends('duplicate'), sends('stale_lease'), sends('qty_mismatch')]).toEqual([2, 1, 1, 1]);
    expect(scraped.value('leasehold_gateway_retries_total')).toBe(1);
    // One check before each attempt: 4 single-attempt sends, and 2 for the retried one.
    expect(scraped.value('leasehold_gateway_lease_checks_total')).toBe(6);
    expect(scraped.value('leasehold_gateway_lease_check_requests_total')).toBe(6);
    expect(scraped.value('leasehold_http_requests_total', { method: 'POST', route: '/send', status: '200' })).toBe(3);
  });

  test("how long the gateway waited for the queue's lease checks and for the receiver, each request counted once", async () => {
    const { app, leased, receiver } = await setup();
    const a = await leased('a', 3);
    const send = () => request(app).post('/send').send({ jobId: 'a', owner: a.owner, token: a.token, qty: 3 });
    receiver.faults.delay({ ms: 300 });
    expect((await send()).status).toBe(200);
    receiver.faults.fail({ status: 503 });
    const retried = await send();
    expect(retried.status).toBe(200);
    expect(retried.headers['leasehold-attempts']).toBe('2');

    const scraped = parseMetrics((await request(app).get('/metrics').expect(200)).text);
    const waited = (kind: 'count' | 'sum', labels: Record<string, string>) =>
      scraped.value(`leasehold_gateway_upstream_request_duration_seconds_${kind}`, labels);
    const checks = { call: 'lease_check', upstream: 'queue' };
    const forwards = { call: 'forward', upstream: 'receiver' };
    // Three lease checks (one per attempt) and three forwards, the refused one included.
    expect({ checks: waited('count', checks), forwards: waited('count', forwards) }).toEqual({
      checks: scraped.value('leasehold_gateway_lease_check_requests_total'),
      forwards: scraped.value('leasehold_gateway_forward_requests_total', { downstream: 'receiver' }),
    });
    expect(waited('count', checks)).toBe(3);
    expect(waited('count', forwards)).toBe(3);
    // The receiver held its first answer 300 ms: the gateway waited at least that long for it.
    expect(waited('sum', forwards)).toBeGreaterThanOrEqual(0.3);
    expect(waited('sum', checks)).toBeGreaterThan(0);
  });

  test('overlapping sends share their lease checks: fewer queue requests than checks', async () => {
    const { app, leased } = await setup();
    const leases = [];
    for (const id of ['p', 'q', 'r', 's', 't', 'u']) leases.push(await leased(id, 1));
    const answers = await Promise.all(
      leases.map((l) => request(app).post('/send').send({ jobId: l.id, owner: l.owner, token: l.token, qty: 1 })),
    );
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200, 200]);
    const scraped = parseMetrics((await request(app).get('/metrics')).text);
    expect(scraped.value('leasehold_gateway_lease_checks_total')).toBe(6);
    expect(scraped.value('leasehold_gateway_lease_check_requests_total')).toBeLessThanOrEqual(6);
    expect(scraped.value('leasehold_gateway_sends_total', { outcome: 'applied' })).toBe(6);
  });
});
