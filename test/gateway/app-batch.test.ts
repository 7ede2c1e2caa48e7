// Forwards coalesced into batches: a downstream that offers batches (Leasehold-Batch) gets the
// effects forwarded while another forward is on its way in one request, each send still answered
// on its own; a lone send goes at once; a downstream that offers none gets single requests; a
// batch that fails goes back to each send's own retry, which verifies the lease again first.
import request from 'supertest';
import { describe, expect, test } from 'vitest';
import { startReceiver } from '../../receiver/index.js';
import { parseMetrics } from '../helpers/metrics.js';
import { toyDownstream } from '../helpers/toy-downstream.js';
import { closeAfterTest, expectError, setup, type Setup } from './setup.js';

const SECRET = 'batch-shared-secret';

async function metrics(s: Setup) {
  return parseMetrics((await request(s.app).get('/metrics')).text);
}

/** Forward requests and the effects they carried, to `downstream`. */
async function forwards(s: Setup, downstream = 'receiver') {
  const scrape = await metrics(s);
  return {
    requests: scrape.value('leasehold_gateway_forward_requests_total', { downstream }),
    effects: scrape.value('leasehold_gateway_forwarded_effects_total', { downstream }),
  };
}

async function until(what: string, condition: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** Time for lease checks on their way to be answered (the queue is local): far less than a forward is held. */
const settle = () => new Promise((resolve) => setTimeout(resolve, 400));

type Send = { jobId: string; owner: string; token: number; to?: string; key?: string; qty?: number; body?: unknown };
const send = (s: Setup, body: Send) => request(s.app).post('/send').send(body);

/**
 * A first send, which teaches the gateway that the receiver takes batches; then one held in
 * flight for `holdMs` by a receiver fault, and `then` started while it is: their forwards wait
 * for it and go together. Resolves to every answer.
 */
async function whileOneIsHeld<T>(
  s: Setup,
  holdMs: number,
  then: () => Promise<T>,
): Promise<{ held: request.Response; rest: T }> {
  const first = await s.leased('first', 1);
  expect((await send(s, { jobId: 'first', owner: 'w1', token: first.token, qty: 1 })).status).toBe(200);
  const lease = await s.leased('held', 1);
  s.receiver.faults.delay({ ms: holdMs });
  const held = send(s, { jobId: 'held', owner: 'w1', token: lease.token, qty: 1 }).then((res) => res);
  // Recorded first, answered after holdMs: once it is in the journal, it is the forward in flight.
  await until('the held send reached the receiver', async () =>
    (await s.receiver.journal()).some((e) => e.jobId === 'held'),
  );
  const rest = await then();
  return { held: await held, rest };
}

describe('gateway batches', () => {
  test('sends made while a forward is in flight go together in one signed batch; each gets its own answer', async () => {
    const s = await setup({ gateway: { secret: SECRET }, receiverSecret: SECRET });
    const jobs = ['a', 'b', 'c', 'd', 'e'];
    const { held, rest } = await whileOneIsHeld(s, 1_500, async () => {
      for (const id of jobs) await s.queueClient.enqueue({ id, qty: 2 });
      const claimed = await Promise.all(jobs.map(() => s.claim('w1')));
      return Promise.all(claimed.map((lease) => send(s, { jobId: lease.id, owner: 'w1', token: lease.token, qty: 2 })));
    });
    expect(held.body.outcome).toBe('applied');
    expect(rest.map((res) => [res.status, res.body.outcome])).toEqual(jobs.map(() => [200, 'applied']));
    expect((await s.receiver.effects()).length).toBe(2 + jobs.length);
    // The first alone, the held one alone, then the five in one batch.
    expect(await forwards(s)).toEqual({ requests: 3, effects: 7 });
    const scrape = await metrics(s);
    expect(
      scrape.value('leasehold_gateway_downstream_sends_total', { downstream: 'receiver', outcome: 'applied' }),
    ).toBe(7);
  });

  test('a lone send goes at once, as a single request, even once batches are known', async () => {
    const s = await setup();
    for (const id of ['one', 'two', 'three']) {
      const lease = await s.leased(id, 1);
      const started = Date.now();
      const res = await send(s, { jobId: id, owner: 'w1', token: lease.token, qty: 1 });
      expect(res.body.outcome).toBe('applied');
      expect(Date.now() - started).toBeLessThan(1_000);
    }
    expect(await forwards(s)).toEqual({ requests: 3, effects: 3 });
  });

  test('mixed outcomes in one batch, and a zombie refused inside it while the others apply', async () => {
    const s = await setup();
    // The zombie's lease verifies, then ends while its forward waits; the next holder sends
    // straight to the receiver, raising the job's fence before the batch arrives.
    const zombie = await s.leased('z', 3, 'w1', 5_000);
    const other = await s.leased('o', 3, 'w1', 600_000);
    const { rest } = await whileOneIsHeld(s, 1_500, async () => {
      const answers = Promise.all([
        send(s, { jobId: 'z', owner: 'w1', token: zombie.token, key: 'late', qty: 1 }),
        send(s, { jobId: 'o', owner: 'w1', token: other.token, qty: 3 }),
        send(s, { jobId: 'o', owner: 'w1', token: other.token, key: 'extra', body: { n: 1 } }),
        send(s, { jobId: 'first', owner: 'w1', token: 1, qty: 1 }),
      ]);
      await until(
        'the four lease checks were sent',
        async () => (await metrics(s)).value('leasehold_gateway_lease_checks_total') >= 6,
      );
      await settle();
      s.clock.advance(5_000);
      const next = await s.claim('w2');
      expect(next.id).toBe('z');
      const direct = await fetch(`${s.receiver.url}/effects`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'fencing-token': String(next.token) },
        body: JSON.stringify({ jobId: 'z', key: 'first', qty: 1 }),
      });
      expect(direct.status).toBe(201);
      return answers;
    });
    const [zombieSend, applied, keyed, duplicate] = rest;
    expectError(zombieSend!, 409, 'fenced');
    expect(zombieSend!.body.error).toMatchObject({
      jobId: 'z',
      key: 'late',
      token: zombie.token,
      highestToken: zombie.token + 1,
    });
    expect([applied!.body.outcome, keyed!.body.outcome, duplicate!.body.outcome]).toEqual([
      'applied',
      'applied',
      'duplicate',
    ]);
    expect(duplicate!.headers['idempotent-replayed']).toBe('true');
    expect(await s.receiver.effect('z', 'late')).toBeUndefined();
    // first, held, the direct one is not the gateway's, then the four in one batch.
    expect(await forwards(s)).toEqual({ requests: 3, effects: 6 });
  });

  test('a batch reset after recording: each send retried alone after its lease verifies again', async () => {
    const s = await setup({ gateway: { retryAttempts: 3, receiverTimeoutMs: 3_000 } });
    const ids = ['r1', 'r2', 'r3'];
    const leases = await Promise.all(ids.map((id) => s.leased(id, 1)));
    let checksBefore = 0;
    const { rest } = await whileOneIsHeld(s, 1_000, async () => {
      checksBefore = (await metrics(s)).value('leasehold_gateway_lease_checks_total');
      // The next request, the batch, is judged and recorded, then its connection reset.
      s.receiver.faults.drop();
      return Promise.all(leases.map((lease) => send(s, { jobId: lease.id, owner: 'w1', token: lease.token, qty: 1 })));
    });
    expect(rest.map((res) => [res.status, res.body.outcome, res.headers['leasehold-attempts']])).toEqual(
      ids.map(() => [200, 'duplicate', '2']),
    );
    const scrape = await metrics(s);
    expect(
      scrape.value('leasehold_gateway_lease_checks_total') - checksBefore,
      'one check per send, one per retry',
    ).toBe(6);
    // The batch of three, then three single retries.
    expect(await forwards(s)).toEqual({ requests: 2 + 1 + 3, effects: 2 + 3 + 3 });
    expect(scrape.value('leasehold_gateway_retries_total')).toBe(3);
  });

  test('a batch that times out: each send retried alone, and a lease lost meanwhile stops its retry', async () => {
    const s = await setup({ gateway: { retryAttempts: 3, receiverTimeoutMs: 2_500, retryBudgetMs: 10_000 } });
    const kept = await s.leased('kept', 1, 'w1', 600_000);
    const lost = await s.leased('lost', 1, 'w1', 5_000);
    const { rest } = await whileOneIsHeld(s, 1_500, async () => {
      // The batch is recorded, and answered only after the gateway gave up waiting for it.
      s.receiver.faults.delay({ ms: 4_000 });
      const answers = Promise.all([
        send(s, { jobId: 'kept', owner: 'w1', token: kept.token, qty: 1 }),
        send(s, { jobId: 'lost', owner: 'w1', token: lost.token, qty: 1 }),
      ]);
      await until(
        'both lease checks were sent',
        async () => (await metrics(s)).value('leasehold_gateway_lease_checks_total') >= 4,
      );
      await settle();
      s.clock.advance(5_000);
      return answers;
    });
    const [keptSend, lostSend] = rest;
    expect([keptSend!.status, keptSend!.body.outcome, keptSend!.headers['leasehold-attempts']]).toEqual([
      200,
      'duplicate',
      '2',
    ]);
    expectError(lostSend!, 409, 'stale_lease');
    expect(lostSend!.body.error.message).toMatch(/lease ended while the gateway was retrying/);
  });

  test('a downstream that offers no batches gets every send as its own request, all at once', async () => {
    const billing = await toyDownstream({ delayMs: 300 });
    const s = await setup({ gateway: { downstreams: { billing: { url: billing.url } } } });
    const leases = await Promise.all(['p', 'q', 'r', 's'].map((id) => s.leased(id, 1)));
    const first = await send(s, { jobId: 'p', owner: 'w1', token: leases[0]!.token, to: 'billing', key: 'k', qty: 1 });
    expect(first.body.outcome).toBe('applied');
    const answers = await Promise.all(
      leases.map((lease) =>
        send(s, { jobId: lease.id, owner: 'w1', token: lease.token, to: 'billing', key: 'k', qty: 1 }),
      ),
    );
    expect(answers.map((res) => res.body.outcome)).toEqual(['duplicate', 'applied', 'applied', 'applied']);
    expect(billing.requests.map((r) => r.path)).toEqual(Array.from({ length: 5 }, () => '/effects'));
    expect(await forwards(s, 'billing')).toEqual({ requests: 5, effects: 5 });
  });

  test('several batching downstreams: one slow holds only its own sends, the others go on', async () => {
    const slow = await startReceiver({ testMode: true });
    closeAfterTest(() => slow.close());
    const s = await setup({
      gateway: { downstreams: { ledger: { url: `${slow.url}/effects` } }, receiverTimeoutMs: 5_000 },
    });
    const leases = await Promise.all(['m1', 'm2', 'm3', 'm4'].map((id) => s.leased(id, 1)));
    // Both learn they take batches.
    const warm = leases[0]!;
    await send(s, { jobId: warm.id, owner: 'w1', token: warm.token, qty: 1 });
    await send(s, { jobId: warm.id, owner: 'w1', token: warm.token, to: 'ledger', key: 'x', qty: 1 });
    slow.faults.delay({ ms: 2_000, count: 3 });
    const started = Date.now();
    const ledger = Promise.all(
      leases.map((lease) =>
        send(s, { jobId: lease.id, owner: 'w1', token: lease.token, to: 'ledger', key: 'l', qty: 1 }),
      ),
    );
    const quick = await Promise.all(
      leases.map((lease) => send(s, { jobId: lease.id, owner: 'w1', token: lease.token, key: 'q', qty: 1 })),
    );
    const quickMs = Date.now() - started;
    expect(quick.map((res) => res.body.outcome)).toEqual(leases.map(() => 'applied'));
    expect(quickMs, 'the receiver did not wait for the slow ledger').toBeLessThan(1_800);
    expect((await ledger).map((res) => res.body.outcome)).toEqual(leases.map(() => 'applied'));
    expect((await slow.effects()).filter((e) => e.key === 'l').length).toBe(4);
  });
});
