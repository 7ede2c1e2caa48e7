// Faults between the gateway and a downstream that offers batches, played by nock: a batch
// answered outside the protocol is 502 bad_downstream for each of its sends, never applied; a
// batch refused as a whole goes again one effect at a time; a batch target on another origin,
// an empty one, or one sent twice, is never used.
import nock from 'nock';
import request from 'supertest';
import { describe, expect, test } from 'vitest';
import type { Lease } from '../../queue/types.js';
import { expectError, setup, type Setup } from './setup.js';
import { interceptDownstreams } from './nock.js';

const ORIGIN = 'http://pay.test';

interceptDownstreams();

const applied = (jobId: string, token: number) => ({
  outcome: 'applied',
  effect: { jobId, key: 'pay', qty: 1, token, appliedAt: 1 },
});

type Reply = [number, Record<string, unknown>, Record<string, string | string[]>];

/**
 * The downstream's single route: every request answered applied, offering `offer` as its batch
 * target; the request `holdIndex` (0-based) is held `holdMs` before its answer. `held()` resolves
 * once that request has arrived.
 */
function singleRoute(offer: string | string[], holdIndex = 1, holdMs = 800) {
  let arrived: () => void = () => undefined;
  const held = new Promise<void>((resolve) => (arrived = resolve));
  let n = 0;
  const paths: string[] = [];
  nock(ORIGIN)
    .persist()
    .post('/effects')
    .reply(function (uri, body, callback) {
      paths.push(uri);
      const { jobId } = body as { jobId: string };
      const token = Number(this.req.headers['fencing-token']);
      const reply: Reply = [201, applied(jobId, token), { 'Leasehold-Batch': offer }];
      if (n++ !== holdIndex) return callback(null, reply);
      arrived();
      setTimeout(() => callback(null, reply), holdMs);
    });
  return { held, paths };
}

async function gateway(): Promise<Setup> {
  return setup({ gateway: { downstreams: { pay: { url: `${ORIGIN}/effects` } }, retryAttempts: 1 } });
}

/** One send first (the offer is learned), one held in flight, then `count` more while it is. */
async function sendsWhileHeld(s: Setup, held: Promise<void>, count: number) {
  const leases: Lease[] = [];
  for (let i = 0; i < 2 + count; i++) leases.push(await s.leased(`job-${i}`, 1));
  const post = (i: number) =>
    request(s.app)
      .post('/send')
      .send({ jobId: `job-${i}`, owner: 'w1', token: leases[i]!.token, to: 'pay', key: 'pay', qty: 1 });
  expect((await post(0)).body.outcome).toBe('applied');
  const inFlight = post(1).then((res) => res);
  await held;
  const rest = await Promise.all(Array.from({ length: count }, (_, i) => post(2 + i)));
  return { first: await inFlight, rest };
}

describe('gateway batches: a downstream out of protocol', () => {
  const badAnswers: Array<[string, Reply]> = [
    ['201 shaped like a single applied', [201, applied('job-2', 1), {}]],
    ['200 with fewer results than effects', [200, { results: [{ status: 201, body: applied('job-2', 1) }] }, {}]],
    ['200 with results that are not {status, body}', [200, { results: ['applied', 'applied'] }, {}]],
    ['409 with no error code', [409, { nope: true }, {}]],
  ];
  for (const [what, reply] of badAnswers) {
    test(`a batch answered ${what}: 502 bad_downstream for each of its sends, nothing applied`, async () => {
      const { held } = singleRoute('/effects?batch');
      const batch = nock(ORIGIN)
        .post('/effects')
        .query({ batch: '' })
        .reply(() => reply);
      const s = await gateway();
      const { first, rest } = await sendsWhileHeld(s, held, 2);
      expect(first.body.outcome).toBe('applied');
      for (const res of rest) {
        expectError(res, 502, 'bad_downstream');
        expect(res.body.error.message).toMatch(/to a batch of effects, which is not an answer of the fencing protocol/);
        expect(res.body.outcome).toBeUndefined();
      }
      expect(batch.isDone()).toBe(true);
    });
  }

  test('a batch refused as a whole (400): each effect goes again alone and gets its own answer', async () => {
    const { held, paths } = singleRoute('/effects?batch');
    const batch = nock(ORIGIN)
      .post('/effects')
      .query({ batch: '' })
      .reply(400, { error: { code: 'invalid_request', message: 'This route takes no batches after all.' } });
    const s = await gateway();
    const { rest } = await sendsWhileHeld(s, held, 2);
    expect(rest.map((res) => [res.status, res.body.outcome])).toEqual([
      [200, 'applied'],
      [200, 'applied'],
    ]);
    expect(batch.isDone()).toBe(true);
    expect(paths.length, 'the first, the held one, and the two again alone').toBe(4);
  });

  test('a batch target on another origin is not used: every effect goes to the endpoint itself', async () => {
    const { held, paths } = singleRoute('http://elsewhere.test/effects?batch');
    const s = await gateway();
    const { rest } = await sendsWhileHeld(s, held, 3);
    expect(rest.map((res) => res.body.outcome)).toEqual(['applied', 'applied', 'applied']);
    expect(paths).toEqual(Array.from({ length: 5 }, () => '/effects'));
  });

  test('an empty batch offer is no offer: every effect goes to the endpoint itself, one at a time', async () => {
    const { held, paths } = singleRoute('');
    const s = await gateway();
    const { rest } = await sendsWhileHeld(s, held, 3);
    expect(rest.map((res) => res.body.outcome)).toEqual(['applied', 'applied', 'applied']);
    expect(paths, 'requests to the endpoint: each send alone').toEqual(Array.from({ length: 5 }, () => '/effects'));
  });

  test('a batch offer sent twice is no offer (Node.js joins the two with ", "): every effect goes to the endpoint itself', async () => {
    const { held, paths } = singleRoute(['/effects?batch', '/effects?batch']);
    const s = await gateway();
    const { rest } = await sendsWhileHeld(s, held, 3);
    expect(rest.map((res) => res.body.outcome)).toEqual(['applied', 'applied', 'applied']);
    expect(paths, 'requests to the endpoint: each send alone').toEqual(Array.from({ length: 5 }, () => '/effects'));
  });
});
