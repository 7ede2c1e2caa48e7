// The queue's HTTP API through supertest (no listen): every endpoint, status and error body.
import { afterEach, describe, expect, test } from 'vitest';
import request from 'supertest';
import { join } from 'node:path';
import { createQueueApp, openSqliteQueueStore, type QueueStore } from '../../queue/index.js';
import { fakeClock } from '../helpers/clock.js';
import { tempDir } from '../helpers/tmp.js';
import { expectError } from './app-setup.js';

const stores: QueueStore[] = [];
afterEach(async () => {
  await Promise.all(stores.splice(0).map((s) => s.close()));
});

async function setup() {
  const clock = fakeClock(1_000_000);
  const store = await openSqliteQueueStore({ filename: join(tempDir('leasehold-app-'), 'q.sqlite'), clock });
  stores.push(store);
  const app = createQueueApp({ store });
  const http = () => request(app);
  const claim = async (owner = 'w1', leaseMs = 1_000) => {
    const res = await http().post('/claims').send({ owner, leaseMs });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body.lease as { id: string; owner: string; token: number; leaseUntil: number };
  };
  return { app, http, store, clock, claim };
}

describe('queue HTTP API', () => {
  test('GET /healthz answers 200', async () => {
    const { http } = await setup();
    expect((await http().get('/healthz')).status).toBe(200);
  });

  test('POST /jobs: 201, same body again 200, different body 409 job_exists', async () => {
    const { http } = await setup();
    const first = await http()
      .post('/jobs')
      .send({ id: 'a', qty: 2, payload: { x: 1 } });
    expect(first.status).toBe(201);
    expect(first.body.job).toMatchObject({ id: 'a', qty: 2, payload: { x: 1 }, status: 'pending', token: 0 });
    const again = await http()
      .post('/jobs')
      .send({ payload: { x: 1 }, qty: 2, id: 'a' });
    expect(again.status).toBe(200);
    expect(again.body.job.createdAt).toBe(first.body.job.createdAt);
    expectError(await http().post('/jobs').send({ id: 'a', qty: 3 }), 409, 'job_exists');
  });

  test('POST /jobs without id generates one', async () => {
    const { http } = await setup();
    const res = await http().post('/jobs').send({ qty: 1 });
    expect(res.status).toBe(201);
    expect(res.body.job.id).toMatch(/^[0-9a-f-]{36}$/);
  });

  test.each([
    ['qty missing', {}],
    ['qty zero', { qty: 0 }],
    ['qty fractional', { qty: 1.5 }],
    ['qty unsafe integer', { qty: 2 ** 53 }],
    ['qty as string', { qty: '3' }],
    ['unknown field', { qty: 1, leaseMS: 5 }],
    ['deadline and deadlineMs', { qty: 1, deadline: 2_000_000, deadlineMs: 5 }],
    ['deadline already passed', { qty: 1, deadline: 1_000_000 }],
    ['maxAttempts 0', { qty: 1, maxAttempts: 0 }],
    ['empty id', { id: '', qty: 1 }],
    ['body is an array', [1, 2]],
  ])('POST /jobs rejects %s with 400 and stores nothing', async (_name, body) => {
    const { http } = await setup();
    expectError(
      await http()
        .post('/jobs')
        .send(body as object),
      400,
      'invalid_request',
    );
    expect((await http().get('/stats')).body).toEqual({ pending: 0, leased: 0, done: 0, dead: 0 });
  });

  test('broken JSON is 400, a body over 1 MiB is 413', async () => {
    const { http } = await setup();
    expectError(
      await http().post('/jobs').set('content-type', 'application/json').send('{"qty": 1,'),
      400,
      'invalid_request',
    );
    const big = { qty: 1, payload: 'x'.repeat(1024 * 1024 + 10) };
    expectError(await http().post('/jobs').send(big), 413, 'payload_too_large');
    expect((await http().get('/stats')).body.pending).toBe(0);
  });

  test('a charset or Content-Encoding it cannot read is 415 unsupported_media_type', async () => {
    const { http } = await setup();
    const body = JSON.stringify({ qty: 1 });
    expectError(
      await http().post('/jobs').set('content-type', 'application/json; charset=latin1').send(body),
      415,
      'unsupported_media_type',
    );
    expectError(
      await http().post('/jobs').set('content-type', 'application/json').set('content-encoding', 'compress').send(body),
      415,
      'unsupported_media_type',
    );
    expect((await http().get('/stats')).body.pending).toBe(0);
  });

  test('POST /claims: 200 with a lease, 204 when nothing is claimable, 400 on bad input', async () => {
    const { http, clock } = await setup();
    expect((await http().post('/claims').send({ owner: 'w1' })).status).toBe(204);
    await http().post('/jobs').send({ id: 'a', qty: 4 });
    const res = await http().post('/claims').send({ owner: 'w1', leaseMs: 500 });
    expect(res.status).toBe(200);
    expect(res.body.lease).toEqual({
      id: 'a',
      qty: 4,
      payload: null,
      owner: 'w1',
      token: 1,
      attempt: 1,
      leaseUntil: clock.now() + 500,
      deadline: null,
    });
    expectError(await http().post('/claims').send({}), 400, 'invalid_request');
    expectError(await http().post('/claims').send({ owner: 'w', leaseMs: 0 }), 400, 'invalid_request');
    expectError(await http().post('/claims').send({ owner: 'w', leaseMs: 'long' }), 400, 'invalid_request');
  });

  test('a claim without leaseMs gets 30 s', async () => {
    const { http, clock } = await setup();
    await http().post('/jobs').send({ qty: 1 });
    const res = await http().post('/claims').send({ owner: 'w1' });
    expect(res.body.lease.leaseUntil).toBe(clock.now() + 30_000);
  });

  test('heartbeat, verify, finish with the current lease', async () => {
    const { http, clock, claim } = await setup();
    await http().post('/jobs').send({ id: 'a', qty: 1 });
    const lease = await claim('w1', 1_000);
    clock.advance(500);
    const hb = await http().post('/jobs/a/heartbeat').send({ owner: 'w1', token: lease.token });
    expect(hb.status).toBe(200);
    expect(hb.body.lease.leaseUntil).toBe(clock.now() + 1_000);
    const verify = await http().post('/jobs/a/verify').send({ owner: 'w1', token: lease.token });
    expect(verify.status).toBe(200);
    expect(verify.body.lease.token).toBe(lease.token);
    const finish = await http()
      .post('/jobs/a/finish')
      .send({ owner: 'w1', token: lease.token, result: { n: 1 } });
    expect(finish.status).toBe(200);
    expect(finish.body.job).toMatchObject({ status: 'done', result: { n: 1 } });
    expect((await http().get('/jobs/a')).body.job.status).toBe('done');
  });

  test('409 stale_lease carries reason, expected and current, and changes nothing', async () => {
    const { http, clock, claim } = await setup();
    await http().post('/jobs').send({ id: 'a', qty: 1 });
    const old = await claim('w1', 1_000);
    clock.set(old.leaseUntil);
    const fresh = await claim('w2', 1_000);
    const before = (await http().get('/jobs/a')).body.job;
    // `expected` is what was presented as the lease, owner and token, whatever else the call carried.
    for (const [path, extra] of [
      ['finish', { result: { n: 1 } }],
      ['heartbeat', { leaseMs: 2_000 }],
      ['verify', {}],
      ['fail', { error: 'late' }],
    ] as const) {
      const res = await http()
        .post(`/jobs/a/${path}`)
        .send({ owner: 'w1', token: old.token, ...extra });
      expectError(res, 409, 'stale_lease');
      expect(res.body.error, path).toMatchObject({
        reason: 'token_mismatch',
        current: { status: 'leased', owner: 'w2', token: fresh.token, leaseUntil: fresh.leaseUntil },
      });
      expect(res.body.error.expected, path).toEqual({ owner: 'w1', token: old.token });
    }
    expect((await http().get('/jobs/a')).body.job).toEqual(before);
  });

  test('a token above the current one was never issued, and is said so; a lower one means the job was claimed again', async () => {
    const { http, clock, claim } = await setup();
    await http().post('/jobs').send({ id: 'a', qty: 1 });
    const first = await claim('w1', 1_000);
    const now = `the job has status leased, owner "w1", token ${first.token}`;
    const never = (token: number) =>
      `Lease on job "a" is not current: token ${token} was never issued for this job (its latest token is ${first.token}). Presented owner "w1" token ${token}; ${now}. Check the token the caller kept: send the one its claim returned.`;
    const before = (await http().get('/jobs/a')).body.job;
    for (const [path, extra] of [
      ['heartbeat', {}],
      ['verify', {}],
      ['finish', {}],
      ['fail', { error: 'e' }],
      ['release', {}],
    ] as const) {
      const res = await http()
        .post(`/jobs/a/${path}`)
        .send({ owner: 'w1', token: 7, ...extra });
      expectError(res, 409, 'stale_lease');
      expect({ path, reason: res.body.error.reason, message: res.body.error.message }).toEqual({
        path,
        reason: 'token_mismatch',
        message: never(7),
      });
    }
    const batch = await http()
      .post('/finishes')
      .send({ owner: 'w1', finishes: [{ id: 'a', token: 7 }] });
    expect(batch.body.results[0].error).toMatchObject({
      code: 'stale_lease',
      reason: 'token_mismatch',
      message: never(7),
    });
    expect((await http().get('/jobs/a')).body.job).toEqual(before);

    // Claimed again by w2: w1's token 1 is below the current one, and that is what happened.
    clock.set(first.leaseUntil);
    const second = await claim('w2', 1_000);
    const late = await http().post('/jobs/a/heartbeat').send({ owner: 'w1', token: first.token });
    expect(late.body.error.message).toBe(
      `Lease on job "a" is not current: the token is not the current one (the job was claimed again). Presented owner "w1" token ${first.token}; the job has status leased, owner "w2", token ${second.token}. Stop working on it and claim again.`,
    );
  });

  test('fail puts the job back at runAt, then dead when attempts are spent', async () => {
    const { http, clock, claim } = await setup();
    await http().post('/jobs').send({ id: 'a', qty: 1, maxAttempts: 2 });
    let lease = await claim();
    const first = await http()
      .post('/jobs/a/fail')
      .send({ owner: 'w1', token: lease.token, error: 'e1', retryInMs: 100 });
    expect(first.status).toBe(200);
    expect(first.body.job).toMatchObject({ status: 'pending', runAt: clock.now() + 100, lastError: 'e1' });
    clock.advance(100);
    lease = await claim();
    const second = await http().post('/jobs/a/fail').send({ owner: 'w1', token: lease.token, error: 'e2' });
    expect(second.body.job).toMatchObject({ status: 'dead', deadReason: 'attempts_exhausted', lastError: 'e2' });
    expectError(await http().post('/jobs/a/fail').send({ owner: 'w1', token: lease.token }), 400, 'invalid_request');
  });

  // The contract: a repeated enqueue is "the same" when its fields, as sent, equal the first one's.
  test('a repeat is the same by its fields as sent: a relative deadline after the clock moved is 200; an explicit default is another body, 409, the job unchanged', async () => {
    const { http, clock } = await setup();
    const first = await http().post('/jobs').send({ id: 'rel', qty: 1, deadlineMs: 60_000 });
    expect(first.status).toBe(201);
    clock.advance(5_000);
    const again = await http().post('/jobs').send({ deadlineMs: 60_000, qty: 1, id: 'rel' });
    expect(again.status, 'the same fields, in another order, 5 s later').toBe(200);
    expect(again.body.job, 'the job as first enqueued: its deadline unmoved').toEqual(first.body.job);

    expect((await http().post('/jobs').send({ id: 'dflt', qty: 1 })).status).toBe(201);
    const before = (await http().get('/jobs/dflt')).body.job;
    expectError(
      await http().post('/jobs').send({ id: 'dflt', qty: 1, maxAttempts: before.maxAttempts }),
      409,
      'job_exists',
    );
    expect((await http().get('/jobs/dflt')).body.job, 'the job after the 409').toEqual(before);
  });

  test('unknown jobs are 404 unknown_job everywhere', async () => {
    const { http } = await setup();
    expectError(await http().get('/jobs/nope'), 404, 'unknown_job');
    for (const path of ['finish', 'heartbeat', 'verify']) {
      expectError(await http().post(`/jobs/nope/${path}`).send({ owner: 'w', token: 1 }), 404, 'unknown_job');
    }
    expectError(await http().post('/jobs/nope/fail').send({ owner: 'w', token: 1, error: 'x' }), 404, 'unknown_job');
  });

  // A refused body changes nothing: on a live lease, every fenced route, the lease still the
  // holder's afterwards, its row as it was.
  const lease = (over: Record<string, unknown> = {}) => ({ owner: 'w1', token: 1, ...over });
  test.each([
    ['finish', 'token 0', lease({ token: 0 })],
    ['finish', 'a fractional token', lease({ token: 1.5 })],
    ['finish', 'a token past 2^53', lease({ token: 2 ** 53 })],
    ['finish', 'no owner', { token: 1 }],
    ['finish', 'an owner that is not a string', lease({ owner: 5 })],
    ['finish', 'next of the wrong kind', lease({ next: 'yes' })],
    ['finish', 'an unknown field', lease({ reuslt: 1 })],
    ['heartbeat', 'leaseMs 0', lease({ leaseMs: 0 })],
    ['heartbeat', 'leaseMs -1', lease({ leaseMs: -1 })],
    ['heartbeat', 'leaseMs as a string', lease({ leaseMs: '5000' })],
    ['heartbeat', 'no token', { owner: 'w1' }],
    ['fail', 'no error', lease()],
    ['fail', 'an error that is a number', lease({ error: 5 })],
    ['fail', 'a negative retryInMs', lease({ error: 'e', retryInMs: -1 })],
    ['verify', 'token 0', lease({ token: 0 })],
    ['release', 'a token as a string', lease({ token: '1' })],
  ])('POST /jobs/:id/%s refuses %s with 400 and changes nothing', async (route, _what, body) => {
    const { http, claim } = await setup();
    await http().post('/jobs').send({ id: 'a', qty: 1 });
    const held = await claim('w1', 5_000);
    expect(held).toMatchObject({ id: 'a', owner: 'w1', token: 1 });
    const before = (await http().get('/jobs/a')).body.job;

    expectError(await http().post(`/jobs/a/${route}`).send(body), 400, 'invalid_request');

    expect((await http().get('/jobs/a')).body.job, 'the job after the refusal').toEqual(before);
    const renewed = await http().post('/jobs/a/heartbeat').send({ owner: 'w1', token: 1 });
    expect(renewed.status, "the lease is still the holder's").toBe(200);
  });

  test('GET /jobs filters by status and limit; GET /stats counts every status', async () => {
    const { http, claim } = await setup();
    for (const id of ['a', 'b', 'c']) await http().post('/jobs').send({ id, qty: 1 });
    await claim();
    const pending = await http().get('/jobs?status=pending&limit=1');
    expect(pending.body.jobs.map((j: { id: string }) => j.id)).toEqual(['b']);
    expect((await http().get('/stats')).body).toEqual({ pending: 2, leased: 1, done: 0, dead: 0 });
    expectError(await http().get('/jobs?status=weird'), 400, 'invalid_request');
    expectError(await http().get('/jobs?limit=0'), 400, 'invalid_request');
  });

  test('unknown routes are 404 with an error body', async () => {
    const { http } = await setup();
    expectError(await http().get('/nothing-here'), 404, 'not_found');
  });
});
