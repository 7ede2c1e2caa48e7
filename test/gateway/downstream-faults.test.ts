// Chaos between the gateway and several downstreams: one is down (nothing listens on its port)
// or slow (nock holds its answer past the timeout) while the others answer; each send's outcome
// depends only on its own downstream, and a fault on one never delays or blocks the rest.
import { createServer } from 'node:net';
import nock from 'nock';
import request from 'supertest';
import { describe, expect, test } from 'vitest';
import { toyDownstream } from '../helpers/toy-downstream.js';
import { expectError, setup } from './setup.js';
import { interceptDownstreams } from './nock.js';

interceptDownstreams();

/**
 * A port nothing listens on: taken, then released. It is chosen below Linux's ephemeral range
 * (32768 up), where the servers other tests start on port 0 never land: a port 0 had given could
 * be given again to one of them meanwhile, which then answered as the "down" downstream.
 */
async function closedPort(): Promise<number> {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    const server = createServer();
    const taken = await new Promise<boolean>((resolve) => {
      server.once('error', () => resolve(false));
      server.listen(port, '127.0.0.1', () => resolve(true));
    });
    if (!taken) continue;
    await new Promise((resolve) => server.close(resolve));
    return port;
  }
}

describe('several downstreams, one faulty', () => {
  test('one down: its sends are 502 upstream_unavailable naming it, "not delivered"; the others apply meanwhile', async () => {
    const billing = await toyDownstream();
    const down = `http://127.0.0.1:${await closedPort()}/effects`;
    const s = await setup({
      gateway: {
        downstreams: { billing: { url: billing.url }, ledger: { url: down } },
        retryAttempts: 3,
        // Room for a loaded machine: the healthy downstreams must not time out meanwhile.
        retryBudgetMs: 10_000,
        receiverTimeoutMs: 5_000,
      },
    });
    const leases = await Promise.all(['job-1', 'job-2', 'job-3'].map((id) => s.leased(id, 2)));
    const sends = leases.flatMap((lease) => {
      const who = { jobId: lease.id, owner: 'w1', token: lease.token };
      return [
        request(s.app)
          .post('/send')
          .send({ ...who, qty: 2 }),
        request(s.app)
          .post('/send')
          .send({ ...who, to: 'billing', key: 'charge', body: { cents: 200 } }),
        request(s.app)
          .post('/send')
          .send({ ...who, to: 'ledger', key: 'entry', qty: 2 }),
      ];
    });
    const answers = await Promise.all(sends);
    const byDownstream = answers.map((res, i) => [
      ['receiver', 'billing', 'ledger'][i % 3],
      res.status,
      res.body.outcome ?? res.body.error?.code,
    ]);
    expect(byDownstream).toEqual(
      leases.flatMap(() => [
        ['receiver', 200, 'applied'],
        ['billing', 200, 'applied'],
        ['ledger', 502, 'upstream_unavailable'],
      ]),
    );
    const refused = answers[2]!;
    expectError(refused, 502, 'upstream_unavailable');
    expect(refused.body.error).toMatchObject({ downstream: 'ledger', attempts: 3 });
    expect(refused.body.error.message).toMatch(
      /^Downstream "ledger" refused the connection on 3 attempts, so the effect was not delivered/,
    );
    expect((await s.receiver.effects()).map((e) => e.jobId).sort()).toEqual(['job-1', 'job-2', 'job-3']);
    expect(billing.applied.map((e) => e.jobId).sort()).toEqual(['job-1', 'job-2', 'job-3']);
  });

  test('one slow: its send is 504 after its timeouts, while sends to the others answer at once', async () => {
    const billing = await toyDownstream({ path: '/billing/effects' });
    const slow = await toyDownstream({ path: '/slow/effects' });
    const s = await setup({
      gateway: {
        downstreams: { billing: { url: billing.url }, slow: { url: slow.url } },
        retryAttempts: 2,
        retryBudgetMs: 12_000,
        receiverTimeoutMs: 4_000,
        backoffBaseMs: 20,
        backoffMaxMs: 40,
      },
    });
    // Only the slow downstream's path is held back; the real server behind it never sees these attempts.
    const scope = nock(new URL(slow.url).origin, { allowUnmocked: true })
      .post('/slow/effects')
      .times(2)
      .delay(10_000)
      .reply(201, {});
    const lease = await s.leased('job-1', 2);
    const who = { jobId: 'job-1', owner: 'w1', token: lease.token };

    const started = performance.now();
    const slowSend = request(s.app)
      .post('/send')
      .send({ ...who, to: 'slow', key: 'k', qty: 1 });
    const slowDone = slowSend.then((res) => ({ res, ms: performance.now() - started }));
    const fast = await Promise.all([
      request(s.app)
        .post('/send')
        .send({ ...who, qty: 2 }),
      request(s.app)
        .post('/send')
        .send({ ...who, to: 'billing', key: 'charge', qty: 7 }),
    ]);
    const fastMs = performance.now() - started;
    expect(fast.map((r) => [r.status, r.body.outcome])).toEqual([
      [200, 'applied'],
      [200, 'applied'],
    ]);
    // The fast sends did not wait for the slow one's first timeout.
    expect(fastMs, `fast sends took ${fastMs} ms`).toBeLessThan(3_000);

    const { res, ms } = await slowDone;
    expectError(res, 504, 'upstream_unavailable');
    expect(res.body.error).toMatchObject({ downstream: 'slow', attempts: 2 });
    expect(res.body.error.message).toContain('Downstream "slow" did not answer within 4000 ms on 2 attempts');
    expect(ms, `the slow send took ${ms} ms`).toBeGreaterThanOrEqual(8_000);
    expect(scope.isDone()).toBe(true);
    expect(slow.applied).toEqual([]);
    expect(billing.applied).toHaveLength(1);
  });

  test('a downstream that resets once, then answers: applied once on the retry, the others untouched', async () => {
    const billing = await toyDownstream();
    const mail = await toyDownstream({ path: '/mail' });
    const s = await setup({
      gateway: { downstreams: { billing: { url: billing.url }, mail: { url: mail.url } }, retryAttempts: 3 },
    });
    const scope = nock(new URL(mail.url).origin, { allowUnmocked: true })
      .post('/mail')
      .replyWithError(Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }));
    const lease = await s.leased('job-1', 2);
    const who = { jobId: 'job-1', owner: 'w1', token: lease.token };
    const [toMail, toBilling] = await Promise.all([
      request(s.app)
        .post('/send')
        .send({ ...who, to: 'mail', key: 'receipt', body: { to: 'a@b' } }),
      request(s.app)
        .post('/send')
        .send({ ...who, to: 'billing', key: 'charge', qty: 1 }),
    ]);
    expect([toMail.status, toMail.body.outcome, toMail.headers['leasehold-attempts']]).toEqual([200, 'applied', '2']);
    expect([toBilling.status, toBilling.headers['leasehold-attempts']]).toEqual([200, '1']);
    expect(scope.isDone()).toBe(true);
    expect([mail.applied.length, billing.applied.length]).toEqual([1, 1]);
  });
});
