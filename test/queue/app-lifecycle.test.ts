// The job lifecycle over HTTP (supertest, no listen): a holder releases its job, an operator
// cancels a live job or retries a dead one; refusals and bad bodies change nothing.
import { describe, expect, test } from 'vitest';
import type { Job } from '../../queue/index.js';
import { appSetup, expectError, untilClaimsWait } from './app-setup.js';

const setup = appSetup;

describe('POST /jobs/:id/release', () => {
  test('gives the job back: pending now, the attempt returned; the next claim gets token + 1', async () => {
    const { http, enqueue, claim } = await setup();
    await enqueue('r');
    const lease = await claim('w1');
    const res = await http().post('/jobs/r/release').send({ owner: 'w1', token: lease.token });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.job).toMatchObject({ id: 'r', status: 'pending', owner: null, attempts: 0, token: 1 });
    expect(await claim('w2')).toMatchObject({ id: 'r', token: 2 });
    const stale = await http().post('/jobs/r/release').send({ owner: 'w1', token: lease.token });
    expectError(stale, 409, 'stale_lease');
    expect(stale.body.error).toMatchObject({ reason: 'token_mismatch', expected: { owner: 'w1', token: 1 } });
    expectError(await http().post('/jobs/ghost/release').send({ owner: 'w1', token: 1 }), 404, 'unknown_job');
  });

  test('a claim waiting with waitMs gets a released job at once', async () => {
    const { http, enqueue, claim } = await setup();
    await enqueue('r');
    const lease = await claim('w1');
    const waiting = http().post('/claims').send({ owner: 'w2', waitMs: 20_000, max: 1 });
    const answered = waiting.then((res) => res);
    await untilClaimsWait(http);
    await http().post('/jobs/r/release').send({ owner: 'w1', token: lease.token });
    const res = await answered;
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.leases).toMatchObject([{ id: 'r', owner: 'w2', token: 2 }]);
  });

  test.each([
    ['no token', { owner: 'w1' }],
    ['token 0', { owner: 'w1', token: 0 }],
    ['token as a string', { owner: 'w1', token: '1' }],
    ['an empty owner', { owner: '', token: 1 }],
    ['an unknown field', { owner: 'w1', token: 1, retryInMs: 0 }],
  ])('%s is 400 and changes nothing', async (_name, body) => {
    const { http, enqueue, claim, job } = await setup();
    await enqueue('r');
    await claim('w1');
    const before = await job('r');
    expectError(await http().post('/jobs/r/release').send(body), 400, 'invalid_request');
    expect(await job('r')).toEqual(before);
  });
});

describe('POST /jobs/:id/cancel', () => {
  test("cancels a leased job; the holder's heartbeat, finish, fail and verify are then 409 not_leased", async () => {
    const { http, enqueue, claim, job } = await setup();
    await enqueue('c');
    const lease = await claim('w1', 60_000);
    const res = await http().post('/jobs/c/cancel').send({ reason: 'customer withdrew' });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.job).toMatchObject({
      status: 'dead',
      deadReason: 'cancelled',
      lastError: 'customer withdrew',
      owner: 'w1',
      token: 1,
    });
    const presented = { owner: 'w1', token: lease.token };
    for (const [path, body] of [
      ['heartbeat', presented],
      ['finish', presented],
      ['fail', { ...presented, error: 'late' }],
      ['verify', presented],
    ] as const) {
      const refused = await http().post(`/jobs/c/${path}`).send(body);
      expectError(refused, 409, 'stale_lease');
      expect({ path, reason: refused.body.error.reason }).toEqual({ path, reason: 'not_leased' });
    }
    expect(await job('c')).toEqual(res.body.job);
  });

  test('a bodiless cancel (no JSON type: what a cross-site page can send) is 415 and changes nothing', async () => {
    const { http, enqueue, job } = await setup();
    await enqueue('p');
    expectError(await http().post('/jobs/p/cancel'), 415, 'unsupported_media_type');
    expectError(await http().post('/jobs/p/retry'), 415, 'unsupported_media_type');
    expect((await job('p')).status).toBe('pending');
  });

  test('{} cancels a pending job without a reason; again is 200 with the same job', async () => {
    const { http, enqueue } = await setup();
    await enqueue('p');
    const first = await http().post('/jobs/p/cancel').send({});
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    expect(first.body.job).toMatchObject({ status: 'dead', deadReason: 'cancelled', lastError: null });
    const again = await http().post('/jobs/p/cancel').send({ reason: 'twice' });
    expect(again.status).toBe(200);
    expect(again.body.job).toEqual(first.body.job);
    expect((await http().post('/claims').send({ owner: 'w1' })).status).toBe(204);
  });

  test('a done job is 409 job_finished, an unknown one 404, and neither changes', async () => {
    const { http, enqueue, claim, job } = await setup();
    await enqueue('d');
    const lease = await claim('w1');
    await http().post('/jobs/d/finish').send({ owner: 'w1', token: lease.token, result: 'ok' });
    const before = await job('d');
    const res = await http().post('/jobs/d/cancel').send({});
    expectError(res, 409, 'job_finished');
    expect(res.body.error).toMatchObject({ id: 'd', status: 'done' });
    expect(await job('d')).toEqual(before);
    expectError(await http().post('/jobs/ghost/cancel').send({}), 404, 'unknown_job');
  });

  test.each([
    ['a reason that is not a string', { reason: 42 }],
    ['an unknown field', { why: 'x' }],
    ['a body that is not an object', [1]],
  ])('%s is 400 and changes nothing', async (_name, body) => {
    const { http, enqueue, job } = await setup();
    await enqueue('p');
    const before = await job('p');
    expectError(await http().post('/jobs/p/cancel').send(body), 400, 'invalid_request');
    expect(await job('p')).toEqual(before);
  });
});

describe('POST /jobs/:id/retry', () => {
  test('a dead job comes back pending with attempts 0 and its token counting on; a waiting claim gets it', async () => {
    const { http, enqueue, claim, clock } = await setup();
    await enqueue('spent', { maxAttempts: 1 });
    const old = await claim('w1', 100);
    clock.advance(100);
    expect((await http().post('/claims').send({ owner: 'w2' })).status).toBe(204);
    const dead = (await http().get('/jobs/spent')).body.job;
    expect(dead).toMatchObject({ status: 'dead', deadReason: 'attempts_exhausted', token: 1 });

    const waiting = http().post('/claims').send({ owner: 'w3', waitMs: 20_000, max: 1 });
    const answered = waiting.then((res) => res);
    await untilClaimsWait(http);
    const res = await http().post('/jobs/spent/retry').send({ maxAttempts: 3 });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.job).toMatchObject({ status: 'pending', attempts: 0, deadReason: null, maxAttempts: 3, token: 1 });
    const woken = await answered;
    expect(woken.body.leases).toMatchObject([{ id: 'spent', owner: 'w3', token: 2, attempt: 1 }]);
    const stale = await http().post('/jobs/spent/finish').send({ owner: 'w1', token: old.token });
    expectError(stale, 409, 'stale_lease');
    expect(stale.body.error.reason).toBe('token_mismatch');
  });

  test('runAt delays the retried job', async () => {
    const { http, enqueue, clock } = await setup();
    await enqueue('later');
    await http().post('/jobs/later/cancel').send({});
    const res = await http()
      .post('/jobs/later/retry')
      .send({ runAt: clock.now() + 500 });
    expect(res.body.job).toMatchObject({ status: 'pending', runAt: clock.now() + 500, lastError: null });
    expect((await http().post('/claims').send({ owner: 'w1' })).status).toBe(204);
    clock.advance(500);
    expect((await http().post('/claims').send({ owner: 'w1' })).body.lease).toMatchObject({ id: 'later', token: 1 });
  });

  test('a job that is not dead is 409 not_dead; past its deadline 409 deadline_passed; unknown 404', async () => {
    const { http, enqueue, clock, job } = await setup();
    await enqueue('live');
    const before = await job('live');
    const res = await http().post('/jobs/live/retry').send({});
    expectError(res, 409, 'not_dead');
    expect(res.body.error).toMatchObject({ id: 'live', status: 'pending' });
    expect(await job('live')).toEqual(before);

    await enqueue('due', { deadlineMs: 100 });
    await http().post('/jobs/due/cancel').send({});
    clock.advance(100);
    const late = await http().post('/jobs/due/retry').send({});
    expectError(late, 409, 'deadline_passed');
    expect((await job('due')).status).toBe('dead');
    expectError(await http().post('/jobs/ghost/retry').send({}), 404, 'unknown_job');
  });

  test.each([
    ['maxAttempts 0', { maxAttempts: 0 }],
    ['maxAttempts 1001', { maxAttempts: 1_001 }],
    ['maxAttempts 1.5', { maxAttempts: 1.5 }],
    ['runAt -1', { runAt: -1 }],
    ['runAt past 2^53 - 1', { runAt: 2 ** 53 }],
    ['runAt as a string', { runAt: '1000' }],
    ['an unknown field', { attempts: 0 }],
  ])('%s is 400 and changes nothing', async (_name, body) => {
    const { http, enqueue, job } = await setup();
    await enqueue('d');
    await http().post('/jobs/d/cancel').send({});
    const before = await job('d');
    expectError(await http().post('/jobs/d/retry').send(body), 400, 'invalid_request');
    expect(await job('d')).toEqual(before);
  });
});

test('GET /jobs?status=dead lists dead jobs with their deadReason', async () => {
  const { http, enqueue, claim } = await setup();
  await enqueue('cancelled');
  await enqueue('spent', { maxAttempts: 1 });
  await enqueue('alive');
  await http().post('/jobs/cancelled/cancel').send({ reason: 'not needed' });
  const lease = await claim('w1');
  await http().post(`/jobs/${lease.id}/fail`).send({ owner: 'w1', token: lease.token, error: 'fatal' });
  const res = await http().get('/jobs?status=dead');
  expect(res.status).toBe(200);
  expect(res.body.jobs.map((j: Job) => ({ id: j.id, deadReason: j.deadReason, lastError: j.lastError }))).toEqual([
    { id: 'cancelled', deadReason: 'cancelled', lastError: 'not needed' },
    { id: 'spent', deadReason: 'attempts_exhausted', lastError: 'fatal' },
  ]);
});
