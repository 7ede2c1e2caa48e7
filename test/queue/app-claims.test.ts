// Fewer round trips per job, over HTTP (supertest, no listen): batch claims, long-polling
// claims, finish-and-claim-next, and several lease checks in one request.
import { describe, expect, test } from 'vitest';
import { appSetup, expectError, untilClaimsWait } from './app-setup.js';

const setup = appSetup;

describe('POST /claims with max and waitMs', () => {
  test('max answers {leases}: between 1 and max, in claim order, all for the one owner', async () => {
    const { http, enqueue } = await setup();
    await enqueue('a');
    await enqueue('b', { priority: 3 });
    await enqueue('c');
    const res = await http().post('/claims').send({ owner: 'w1', leaseMs: 1_000, max: 2 });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.leases.map((l: { id: string; owner: string }) => [l.id, l.owner])).toEqual([
      ['b', 'w1'],
      ['a', 'w1'],
    ]);
    const rest = await http().post('/claims').send({ owner: 'w2', max: 100 });
    expect(rest.body.leases.map((l: { id: string }) => l.id)).toEqual(['c']);
    expect((await http().post('/claims').send({ owner: 'w3', max: 5 })).status).toBe(204);
  });

  test('without max the answer is {lease}, as before', async () => {
    const { http, enqueue } = await setup();
    await enqueue('solo');
    const res = await http().post('/claims').send({ owner: 'w1' });
    expect(Object.keys(res.body)).toEqual(['lease']);
    expect(res.body.lease.id).toBe('solo');
  });

  test.each([
    ['max 0', { max: 0 }],
    ['max 101', { max: 101 }],
    ['max 1.5', { max: 1.5 }],
    ['waitMs -1', { waitMs: -1 }],
    ['waitMs 30001', { waitMs: 30_001 }],
    ['waitMs as a string', { waitMs: '10' }],
  ])('%s is 400 and claims nothing', async (_name, extra) => {
    const { http, enqueue, store } = await setup();
    await enqueue('kept');
    expectError(
      await http()
        .post('/claims')
        .send({ owner: 'w1', ...extra }),
      400,
      'invalid_request',
    );
    expect((await store.get('kept'))?.status).toBe('pending');
  });

  test('a claim waiting with waitMs gets a job enqueued meanwhile', async () => {
    const { http, enqueue } = await setup();
    const waiting = http().post('/claims').send({ owner: 'w1', waitMs: 20_000, max: 4 });
    const answered = waiting.then((res) => res);
    await untilClaimsWait(http);
    await enqueue('late');
    const res = await answered;
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.leases.map((l: { id: string }) => l.id)).toEqual(['late']);
  });

  test('a claim whose waitMs passes with nothing claimable is 204', async () => {
    const { http } = await setup();
    const res = await http().post('/claims').send({ owner: 'w1', waitMs: 50 });
    expect(res.status).toBe(204);
  });
});

describe('POST /jobs/:id/finish with next', () => {
  test('next: true finishes and answers the next lease for the same owner', async () => {
    const { http, enqueue, store } = await setup();
    await enqueue('one');
    await enqueue('two');
    const lease = (await http().post('/claims').send({ owner: 'w1', leaseMs: 2_000 })).body.lease;
    const res = await http().post('/jobs/one/finish').send({ owner: 'w1', token: lease.token, result: 7, next: true });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.job).toMatchObject({ id: 'one', status: 'done', result: 7 });
    expect(res.body.next).toMatchObject({ id: 'two', owner: 'w1', token: 1 });
    expect((await store.get('two'))?.status).toBe('leased');
    const last = await http()
      .post('/jobs/two/finish')
      .send({ owner: 'w1', token: 1, next: { leaseMs: 500 } });
    expect(last.body).toMatchObject({ job: { id: 'two', status: 'done' }, next: null });
  });

  test('a refused finish with next is 409 stale_lease and claims nothing', async () => {
    const { http, enqueue, store } = await setup();
    await enqueue('held');
    await enqueue('other');
    await http().post('/claims').send({ owner: 'w1' });
    const res = await http().post('/jobs/held/finish').send({ owner: 'w1', token: 2, next: true });
    expectError(res, 409, 'stale_lease');
    expect(res.body.error.reason).toBe('token_mismatch');
    expect((await store.get('other'))?.status).toBe('pending');
  });

  test('next of another shape is 400', async () => {
    const { http, enqueue } = await setup();
    await enqueue('x');
    await http().post('/claims').send({ owner: 'w1' });
    expectError(
      await http().post('/jobs/x/finish').send({ owner: 'w1', token: 1, next: 'yes' }),
      400,
      'invalid_request',
    );
    expectError(
      await http()
        .post('/jobs/x/finish')
        .send({ owner: 'w1', token: 1, next: { leaseMs: 0 } }),
      400,
      'invalid_request',
    );
  });
});

describe('POST /verifications', () => {
  test('answers each lease check as verify would, in order', async () => {
    const { http, enqueue } = await setup();
    await enqueue('v');
    const lease = (await http().post('/claims').send({ owner: 'w1' })).body.lease;
    const res = await http()
      .post('/verifications')
      .send({
        leases: [
          { id: 'v', owner: 'w1', token: lease.token },
          { id: 'v', owner: 'w2', token: lease.token },
          { id: 'ghost', owner: 'w1', token: 1 },
        ],
      });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.results[0]).toEqual({ lease });
    expect(res.body.results[1].error).toMatchObject({ code: 'stale_lease', reason: 'owner_mismatch' });
    expect(res.body.results[2].error).toMatchObject({ code: 'unknown_job' });
  });

  test('an empty list, or more than 100 checks, is 400', async () => {
    const { http } = await setup();
    expectError(await http().post('/verifications').send({ leases: [] }), 400, 'invalid_request');
    const many = Array.from({ length: 101 }, (_, i) => ({ id: `j${i}`, owner: 'w', token: 1 }));
    expectError(await http().post('/verifications').send({ leases: many }), 400, 'invalid_request');
  });
});
