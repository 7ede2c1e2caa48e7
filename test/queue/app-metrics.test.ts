// GET /metrics on the queue: requests by route pattern, claims, finishes, stale-lease refusals
// by reason, lease time left at finish, jobs by status, transactions, long-poll waiters.
import { join } from 'node:path';
import request from 'supertest';
import { afterEach, expect, test } from 'vitest';
import { createQueueApp, openSqliteQueueStore, type QueueApp, type QueueStore } from '../../queue/index.js';
import { fakeClock } from '../helpers/clock.js';
import { parseMetrics } from '../helpers/metrics.js';
import { tempDir } from '../helpers/tmp.js';

const closers: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

async function setup() {
  const clock = fakeClock(1_000_000);
  const store: QueueStore = await openSqliteQueueStore({
    filename: join(tempDir('leasehold-metrics-'), 'q.sqlite'),
    clock,
  });
  closers.push(() => store.close());
  const app: QueueApp = createQueueApp({ store, repollMs: 20 });
  closers.push(() => app.close());
  const http = () => request(app);
  const scrape = async () => {
    const res = await http().get('/metrics');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain/);
    return parseMetrics(res.text);
  };
  return { app, http, clock, scrape };
}

test('claims, finishes and the lease time left at each finish', async () => {
  const { http, clock, scrape } = await setup();
  for (const id of ['a', 'b', 'c']) expect((await http().post('/jobs').send({ id, qty: 1 })).status).toBe(201);
  const before = await scrape();
  expect(before.value('leasehold_queue_claims_total')).toBe(0);
  expect(before.value('leasehold_queue_jobs', { status: 'pending' })).toBe(3);

  const { lease } = (await http().post('/claims').send({ owner: 'w1', leaseMs: 1_000 })).body;
  clock.advance(300);
  expect((await http().post(`/jobs/${lease.id}/finish`).send({ owner: 'w1', token: lease.token })).status).toBe(200);
  const batch = await http().post('/claims').send({ owner: 'w2', leaseMs: 1_000, max: 5 });
  expect(batch.body.leases).toHaveLength(2);

  const after = await scrape();
  expect(after.value('leasehold_queue_claims_total')).toBe(3);
  expect(after.value('leasehold_queue_finishes_total')).toBe(1);
  expect(after.value('leasehold_queue_finish_lease_left_ms_count')).toBe(1);
  expect(after.value('leasehold_queue_finish_lease_left_ms_sum')).toBe(700);
  expect(after.value('leasehold_queue_finish_lease_left_ms_bucket', { le: '500' })).toBe(0);
  expect(after.value('leasehold_queue_finish_lease_left_ms_bucket', { le: '1000' })).toBe(1);
  expect(
    ['pending', 'leased', 'done', 'dead'].map((status) => after.value('leasehold_queue_jobs', { status })),
  ).toEqual([0, 2, 1, 0]);
});

test('stale-lease refusals by call and reason, batched lease checks included', async () => {
  const { http, clock, scrape } = await setup();
  await http().post('/jobs').send({ id: 'a', qty: 1 });
  const { lease } = (await http().post('/claims').send({ owner: 'w1', leaseMs: 1_000 })).body;
  const id = lease.id as string;
  expect((await http().post(`/jobs/${id}/heartbeat`).send({ owner: 'w1', token: 9 })).status).toBe(409);
  expect((await http().post(`/jobs/${id}/heartbeat`).send({ owner: 'w9', token: lease.token })).status).toBe(409);
  clock.advance(1_000);
  expect((await http().post(`/jobs/${id}/finish`).send({ owner: 'w1', token: lease.token })).status).toBe(409);
  const checks = await http()
    .post('/verifications')
    .send({
      leases: [
        { id, owner: 'w1', token: lease.token },
        { id, owner: 'w1', token: 7 },
      ],
    });
  expect(checks.status).toBe(200);

  const scraped = await scrape();
  const refusals = (op: string, reason: string) =>
    scraped.value('leasehold_queue_stale_lease_refusals_total', { op, reason });
  expect(refusals('heartbeat', 'token_mismatch')).toBe(1);
  expect(refusals('heartbeat', 'owner_mismatch')).toBe(1);
  expect(refusals('finish', 'lease_expired')).toBe(1);
  expect(refusals('verify', 'lease_expired')).toBe(1);
  expect(refusals('verify', 'token_mismatch')).toBe(1);
  expect(scraped.value('leasehold_queue_finishes_total')).toBe(0);
});

test('requests are counted by route pattern and status, never by raw path', async () => {
  const { http, scrape } = await setup();
  await http().post('/jobs').send({ id: 'job-1', qty: 1 });
  await http().get('/jobs/job-1');
  await http().get('/jobs/job-2');
  await http().get('/no/such/route');
  const scraped = await scrape();
  const requests = (method: string, route: string, status: string) =>
    scraped.value('leasehold_http_requests_total', { method, route, status });
  expect(requests('POST', '/jobs', '201')).toBe(1);
  expect(requests('GET', '/jobs/:id', '200')).toBe(1);
  expect(requests('GET', '/jobs/:id', '404')).toBe(1);
  expect(requests('GET', '(none)', '404')).toBe(1);
  expect(scraped.value('leasehold_http_request_duration_seconds_count', { method: 'GET', route: '/jobs/:id' })).toBe(2);
  expect(scraped.text).not.toContain('job-1');
});

test('transactions and their writes, and long-polling claimers waiting', async () => {
  const { app, scrape } = await setup();
  const server = app.listen(0, '127.0.0.1');
  closers.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  await new Promise((resolve) => server.once('listening', resolve));
  const waiting = request(server)
    .post('/claims')
    .send({ owner: 'w1', waitMs: 10_000 })
    .then((res) => res);
  await expect.poll(async () => (await scrape()).value('leasehold_queue_claim_waiters')).toBe(1);
  await request(server).post('/jobs').send({ id: 'late', qty: 1 });
  expect((await waiting).status).toBe(200);

  const scraped = await scrape();
  expect(scraped.value('leasehold_queue_claim_waiters')).toBe(0);
  const transactions = scraped.value('leasehold_queue_transactions_total');
  const writes = scraped.value('leasehold_queue_transaction_writes_total');
  expect(transactions).toBeGreaterThanOrEqual(1);
  expect(writes).toBeGreaterThanOrEqual(transactions);
  expect(scraped.value('leasehold_queue_writes_per_transaction')).toBeCloseTo(writes / transactions);
});

test('each app has its own registry: two apps in one process count apart', async () => {
  const one = await setup();
  const two = await setup();
  await one.http().post('/jobs').send({ id: 'a', qty: 1 });
  await one.http().post('/claims').send({ owner: 'w1' });
  expect((await one.scrape()).value('leasehold_queue_claims_total')).toBe(1);
  expect((await two.scrape()).value('leasehold_queue_claims_total')).toBe(0);
  expect((await two.scrape()).text).toMatch(/leasehold_queue_claims_total\{service="queue"\} 0/);
});
