// Downstream faults between the gateway and a REAL receiver, injected with nock on the
// receiver's host:port only (the queue and supertest stay on the real network), plus the
// receiver's own "record, then reset the connection" fault for a real TCP reset.
import http from 'node:http';
import nock from 'nock';
import request from 'supertest';
import { describe, expect, test } from 'vitest';
import { expectError, setup, type Setup, type SetupOptions } from './setup.js';
import { interceptDownstreams } from './nock.js';

interceptDownstreams();

/** Only this test's receiver is intercepted; unmatched requests to it reach the real receiver. */
function intercept(receiverUrl: string) {
  return nock(receiverUrl, { allowUnmocked: true }).post('/effects');
}

/** Sends what the gateway sent straight on to the real receiver (the interceptor is consumed by then). */
function deliver(receiverUrl: string, headers: Record<string, string>, body: unknown): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      new URL('/effects', receiverUrl),
      { method: 'POST', headers: { 'content-type': 'application/json', 'fencing-token': headers['fencing-token']! } },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

/** `call` given up by its caller after `ms`: 'timed out' when it was, else how it ended. */
const hangUpAfter = (call: request.Test, ms: number): Promise<string> =>
  call.timeout(ms).then(
    () => 'answered',
    (err: { timeout?: number }) => (err.timeout ? 'timed out' : String(err)),
  );

const resetError = () => Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });

async function faultSetup(gateway: SetupOptions['gateway'] = {}): Promise<Setup> {
  return setup({ gateway: { receiverTimeoutMs: 2_500, retryAttempts: 3, retryBudgetMs: 10_000, ...gateway } });
}

const send = (s: Setup, token: number, qty = 5) =>
  request(s.app).post('/send').send({ jobId: 'job-1', owner: 'w1', token, qty });

describe('gateway ↔ receiver faults', () => {
  test('nock intercepts the forwarder on its keep-alive agent (nothing reaches the real receiver)', async () => {
    const s = await faultSetup();
    const lease = await s.leased('job-1', 5);
    const scope = intercept(s.receiver.url).reply(201, {
      outcome: 'applied',
      effect: { jobId: 'job-1', qty: 5, token: 1, appliedAt: 0 },
    });
    const res = await send(s, lease.token);
    expect({ status: res.status, outcome: res.body.outcome }).toEqual({ status: 200, outcome: 'applied' });
    expect(scope.isDone()).toBe(true);
    expect(await s.receiver.journal()).toEqual([]);
  });

  test('a timeout, then success on the retry: one effect', async () => {
    const s = await faultSetup();
    const lease = await s.leased('job-1', 5);
    const scope = intercept(s.receiver.url).delay(10_000).reply(201, {});
    const res = await send(s, lease.token);
    expect({ status: res.status, body: res.body }, JSON.stringify(res.body)).toMatchObject({
      status: 200,
      body: { outcome: 'applied' },
    });
    expect(res.headers['leasehold-attempts']).toBe('2');
    expect(scope.isDone()).toBe(true);
    expect(await s.receiver.effects()).toEqual([
      expect.objectContaining({ jobId: 'job-1', qty: 5, token: lease.token }),
    ]);
  });

  test('a reset after the receiver recorded the effect, then a retry that comes back duplicate', async () => {
    const s = await faultSetup();
    const lease = await s.leased('job-1', 5);
    const delivered: number[] = [];
    const scope = intercept(s.receiver.url).reply(async function (_uri, body) {
      delivered.push(await deliver(s.receiver.url, this.req.headers, body));
      throw resetError();
    });
    const res = await send(s, lease.token);
    expect(delivered).toEqual([201]);
    expect({ status: res.status, outcome: res.body.outcome }, JSON.stringify(res.body)).toEqual({
      status: 200,
      outcome: 'duplicate',
    });
    expect(res.headers['leasehold-attempts']).toBe('2');
    expect(scope.isDone()).toBe(true);
    expect(await s.receiver.totals()).toEqual({ effects: 1, qty: 5 });
    expect((await s.receiver.journal()).map((e) => e.outcome)).toEqual(['applied', 'duplicate']);
  });

  test("the receiver's own fault: record, then a real TCP reset; the retry is a duplicate", async () => {
    const s = await faultSetup();
    const lease = await s.leased('job-1', 5);
    s.receiver.faults.drop();
    const res = await send(s, lease.token);
    expect({ status: res.status, outcome: res.body.outcome }, JSON.stringify(res.body)).toEqual({
      status: 200,
      outcome: 'duplicate',
    });
    expect((await s.receiver.journal()).map((e) => e.outcome)).toEqual(['applied', 'duplicate']);
  });

  test('a 5xx storm until the attempts are spent: 502 upstream_unavailable saying what happened', async () => {
    const s = await faultSetup();
    const lease = await s.leased('job-1', 5);
    const scope = intercept(s.receiver.url)
      .times(3)
      .reply(503, { error: { code: 'busy', message: 'locked' } });
    const res = await send(s, lease.token);
    expectError(res, 502, 'upstream_unavailable');
    expect(res.body.error.message).toBe(
      'The receiver answered 503 (busy) on 3 attempts; the effect may or may not have been applied — resend, it is idempotent.',
    );
    expect(res.body.error.attempts).toBe(3);
    expect(scope.isDone()).toBe(true);
    expect(await s.receiver.journal()).toEqual([]);
  });

  test('a 5xx storm until the time budget is spent: stops within the budget and says so', async () => {
    const s = await faultSetup({
      retryAttempts: 1_000,
      retryBudgetMs: 2_000,
      receiverTimeoutMs: 1_000,
      backoffBaseMs: 50,
      backoffMaxMs: 100,
    });
    const lease = await s.leased('job-1', 5);
    let calls = 0;
    intercept(s.receiver.url)
      .reply(() => {
        calls += 1;
        return [500, { error: { code: 'internal' } }];
      })
      .persist();
    const started = Date.now();
    const res = await send(s, lease.token);
    const elapsed = Date.now() - started;
    expectError(res, 502, 'upstream_unavailable');
    expect(res.body.error.message).toContain('(the 2000 ms retry budget ran out)');
    expect(res.body.error.attempts).toBe(calls);
    expect(calls).toBeGreaterThan(1);
    expect(elapsed).toBeLessThan(2_000 + 2_000);
  });

  test('every attempt times out: 504 upstream_unavailable', async () => {
    const s = await faultSetup({ receiverTimeoutMs: 300, retryAttempts: 2 });
    const lease = await s.leased('job-1', 5);
    intercept(s.receiver.url).times(2).delay(5_000).reply(201, {});
    const res = await send(s, lease.token);
    expectError(res, 504, 'upstream_unavailable');
    expect(res.body.error.message).toBe(
      'The receiver did not answer within 300 ms on 2 attempts; the effect may or may not have been applied — resend, it is idempotent.',
    );
  });

  test('the lease ends between two retries (claimed by another): retries stop with 409 stale_lease', async () => {
    const s = await faultSetup();
    const lease = await s.leased('job-1', 5, 'w1', 1_000);
    let calls = 0;
    intercept(s.receiver.url)
      .reply(async () => {
        calls += 1;
        s.clock.advance(1_000);
        await s.claim('w2');
        return [503, { error: { code: 'busy' } }];
      })
      .persist();
    const res = await send(s, lease.token);
    expectError(res, 409, 'stale_lease');
    expect(res.body.error).toMatchObject({
      reason: 'token_mismatch',
      expected: { owner: 'w1', token: lease.token },
      current: { owner: 'w2', token: lease.token + 1 },
      attempts: 1,
    });
    expect(res.body.error.message).toContain('The lease ended while the gateway was retrying the receiver');
    expect(calls).toBe(1);
    expect(await s.receiver.journal()).toEqual([]);
  });

  test('the lease expires between two retries (nobody claimed): 409 stale_lease lease_expired', async () => {
    const s = await faultSetup();
    const lease = await s.leased('job-1', 5, 'w1', 1_000);
    intercept(s.receiver.url)
      .reply(() => {
        s.clock.advance(1_000);
        return [502];
      })
      .persist();
    const res = await send(s, lease.token);
    expectError(res, 409, 'stale_lease');
    expect(res.body.error).toMatchObject({
      reason: 'lease_expired',
      attempts: 1,
      failures: [{ kind: 'status', status: 502 }],
    });
  });

  test('a caller that hangs up mid-retry stops the retries', async () => {
    const s = await faultSetup({ retryAttempts: 1_000, retryBudgetMs: 30_000, backoffBaseMs: 100, backoffMaxMs: 100 });
    const lease = await s.leased('job-1', 5);
    let calls = 0;
    intercept(s.receiver.url)
      .reply(() => {
        calls += 1;
        return [503, { error: { code: 'busy' } }];
      })
      .persist();
    const hungUp = await hangUpAfter(send(s, lease.token), 600);
    expect(hungUp).toBe('timed out');
    const atHangUp = calls;
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(atHangUp).toBeGreaterThan(0);
    // Without the hang-up, ~20 more attempts would have been made by now; one may have been in
    // flight and one more may start before a loaded event loop delivers the close.
    expect(calls - atHangUp).toBeLessThanOrEqual(2);
  });
});

describe('POST /sends under downstream faults', () => {
  test('a caller that hangs up mid-retry stops the retries of every send in its batch', async () => {
    const s = await faultSetup({ retryAttempts: 1_000, retryBudgetMs: 30_000, backoffBaseMs: 100, backoffMaxMs: 100 });
    const a = await s.leased('job-a', 5);
    const b = await s.leased('job-b', 5);
    const jobs = new Set<string>();
    let calls = 0;
    intercept(s.receiver.url)
      .reply((_uri, body) => {
        calls += 1;
        jobs.add((body as { jobId: string }).jobId);
        return [503, { error: { code: 'busy' } }];
      })
      .persist();
    const hungUp = await hangUpAfter(
      request(s.app)
        .post('/sends')
        .send({
          sends: [
            { jobId: 'job-a', owner: 'w1', token: a.token, qty: 5 },
            { jobId: 'job-b', owner: 'w1', token: b.token, qty: 5 },
          ],
        }),
      600,
    );
    expect(hungUp).toBe('timed out');
    const atHangUp = calls;
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect([...jobs].sort(), 'both sends were being retried').toEqual(['job-a', 'job-b']);
    // Without the hang-up, ~40 more attempts would have been made by now; each send may have
    // had one in flight and start one more before a loaded event loop delivers the close.
    expect(calls - atHangUp).toBeLessThanOrEqual(4);
    const metrics = (await request(s.app).get('/metrics')).text;
    expect(metrics).toMatch(/leasehold_gateway_sends_total\{outcome="abandoned"[^}]*\} 2/);
  });
});
