// The gateway app through supertest, in front of a REAL queue and a REAL receiver: what is
// forwarded, what is refused before anything reaches the receiver, and what comes back.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import request from 'supertest';
import { describe, expect, test } from 'vitest';
import { signatureHeader } from '../../receiver/signature.js';
import { expectError, setup } from './setup.js';

describe('gateway: forwarding a current lease', () => {
  test('a current lease is forwarded with its token and applied', async () => {
    const { app, receiver, leased } = await setup();
    const lease = await leased('job-1', 5, 'w1');
    const res = await request(app).post('/send').send({ jobId: 'job-1', owner: 'w1', token: lease.token, qty: 5 });
    expect({ status: res.status, body: res.body }).toMatchObject({
      status: 200,
      body: { outcome: 'applied', effect: { jobId: 'job-1', qty: 5, token: lease.token } },
    });
    expect(res.headers['leasehold-attempts']).toBe('1');
    expect(await receiver.effects()).toEqual([expect.objectContaining({ jobId: 'job-1', qty: 5, token: 1 })]);
  });

  test('a resend is a duplicate: 200, Idempotent-Replayed, nothing added', async () => {
    const { app, receiver, leased } = await setup();
    const lease = await leased('job-1', 5);
    const body = { jobId: 'job-1', owner: 'w1', token: lease.token, qty: 5 };
    expect((await request(app).post('/send').send(body)).body.outcome).toBe('applied');
    const again = await request(app).post('/send').send(body);
    expect({ status: again.status, outcome: again.body.outcome }).toEqual({ status: 200, outcome: 'duplicate' });
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(await receiver.totals()).toEqual({ effects: 1, qty: 5 });
    expect((await receiver.journal()).map((e) => e.outcome)).toEqual(['applied', 'duplicate']);
  });

  test('422 conflict from the receiver is passed through with the recorded effect', async () => {
    const { app, receiver, leased } = await setup();
    const lease = await leased('job-1', 5);
    // Another path to the receiver already recorded another qty for this job under the same token.
    const direct = await request(receiver.url)
      .post('/effects')
      .set('Fencing-Token', String(lease.token))
      .send({ jobId: 'job-1', qty: 6 });
    expect(direct.status).toBe(201);
    const res = await request(app).post('/send').send({ jobId: 'job-1', owner: 'w1', token: lease.token, qty: 5 });
    expectError(res, 422, 'conflict');
    expect(res.body.error).toMatchObject({ jobId: 'job-1', qty: 5, effect: { qty: 6, token: 1 } });
    expect(await receiver.totals()).toEqual({ effects: 1, qty: 6 });
  });

  test('409 fenced from the receiver is passed through with highestToken', async () => {
    const { app, receiver, leased } = await setup();
    const lease = await leased('job-1', 5);
    // Another path to the receiver already used a higher token for this job.
    const direct = await request(receiver.url)
      .post('/effects')
      .set('Fencing-Token', '7')
      .send({ jobId: 'job-1', qty: 5 });
    expect(direct.status).toBe(201);
    const res = await request(app).post('/send').send({ jobId: 'job-1', owner: 'w1', token: lease.token, qty: 5 });
    expectError(res, 409, 'fenced');
    expect(res.body.error).toMatchObject({ jobId: 'job-1', token: 1, highestToken: 7 });
  });
});

describe('gateway: refusing before anything is forwarded', () => {
  test('a stale worker (lease expired, job claimed by another) gets 409 stale_lease; the receiver never sees it', async () => {
    const { app, receiver, leased, claim, clock } = await setup();
    const old = await leased('job-1', 5, 'w1', 1_000);
    clock.advance(1_000); // now == leaseUntil: the lease has ended and the job is claimable
    const current = await claim('w2');
    expect(current.token).toBe(old.token + 1);

    const res = await request(app).post('/send').send({ jobId: 'job-1', owner: 'w1', token: old.token, qty: 5 });
    expectError(res, 409, 'stale_lease');
    expect(res.body.error).toMatchObject({
      reason: 'token_mismatch',
      expected: { owner: 'w1', token: old.token },
      current: { status: 'leased', owner: 'w2', token: current.token },
    });
    expect(res.body.error.message).toContain('Nothing was forwarded');
    expect(await receiver.journal()).toEqual([]);

    // The current holder goes through; the stale one stays refused afterwards too.
    const ok = await request(app).post('/send').send({ jobId: 'job-1', owner: 'w2', token: current.token, qty: 5 });
    expect(ok.body).toMatchObject({ outcome: 'applied', effect: { token: current.token } });
    expectError(
      await request(app).post('/send').send({ jobId: 'job-1', owner: 'w1', token: old.token, qty: 5 }),
      409,
      'stale_lease',
    );
    expect((await receiver.journal()).map((e) => [e.token, e.outcome])).toEqual([[current.token, 'applied']]);
  });

  test('an expired lease nobody claimed yet is refused too (lease_expired)', async () => {
    const { app, receiver, leased, clock } = await setup();
    const lease = await leased('job-1', 5, 'w1', 1_000);
    clock.advance(1_000);
    const res = await request(app).post('/send').send({ jobId: 'job-1', owner: 'w1', token: lease.token, qty: 5 });
    expectError(res, 409, 'stale_lease');
    expect(res.body.error.reason).toBe('lease_expired');
    expect(await receiver.journal()).toEqual([]);
  });

  test('a token the queue never issued is refused saying so, not that the job was claimed again', async () => {
    const { app, receiver, leased } = await setup();
    const lease = await leased('job-1', 5);
    const res = await request(app).post('/send').send({ jobId: 'job-1', owner: 'w1', token: 7, qty: 5 });
    expectError(res, 409, 'stale_lease');
    expect(res.body.error).toMatchObject({ reason: 'token_mismatch', expected: { owner: 'w1', token: 7 } });
    expect(res.body.error.message).toBe(
      `Lease on job "job-1" is not current: token 7 was never issued for this job (its latest token is ${lease.token}). Presented owner "w1" token 7; the job has status leased, owner "w1", token ${lease.token}. Check the token the caller kept: send the one its claim returned. Nothing was forwarded.`,
    );
    expect(await receiver.journal()).toEqual([]);
  });

  test("a worker presenting someone else's token under its own name is refused (owner_mismatch)", async () => {
    const { app, receiver, leased } = await setup();
    const lease = await leased('job-1', 5, 'w1');
    const res = await request(app)
      .post('/send')
      .send({ jobId: 'job-1', owner: 'intruder', token: lease.token, qty: 5 });
    expectError(res, 409, 'stale_lease');
    expect(res.body.error).toMatchObject({
      reason: 'owner_mismatch',
      expected: { owner: 'intruder', token: lease.token },
      current: { owner: 'w1', token: lease.token },
    });
    expect(await receiver.journal()).toEqual([]);
  });

  test("a qty other than the job's is 422 qty_mismatch; the receiver never sees it, and the job's qty then goes through", async () => {
    const { app, receiver, leased } = await setup();
    const lease = await leased('job-1', 3);
    const res = await request(app).post('/send').send({ jobId: 'job-1', owner: 'w1', token: lease.token, qty: 5 });
    expectError(res, 422, 'qty_mismatch');
    expect(res.body.error).toEqual({
      code: 'qty_mismatch',
      message: `The send's qty (5) is not job "job-1"'s qty (3); nothing was forwarded. Send the job's qty.`,
      jobId: 'job-1',
      qty: 5,
      jobQty: 3,
    });
    expect((await request(receiver.url).get('/effects/job-1')).status).toBe(404);
    expect(await receiver.journal()).toEqual([]);

    const ok = await request(app).post('/send').send({ jobId: 'job-1', owner: 'w1', token: lease.token, qty: 3 });
    expect({ status: ok.status, body: ok.body }).toMatchObject({
      status: 200,
      body: { outcome: 'applied', effect: { jobId: 'job-1', qty: 3, token: lease.token } },
    });
    expect(await receiver.totals()).toEqual({ effects: 1, qty: 3 });
  });

  test('once the effect is applied, a resend with another qty is 422 qty_mismatch from the gateway, not a conflict', async () => {
    const { app, receiver, leased } = await setup();
    const lease = await leased('job-1', 5);
    expect(
      (await request(app).post('/send').send({ jobId: 'job-1', owner: 'w1', token: lease.token, qty: 5 })).body.outcome,
    ).toBe('applied');
    const res = await request(app).post('/send').send({ jobId: 'job-1', owner: 'w1', token: lease.token, qty: 6 });
    expectError(res, 422, 'qty_mismatch');
    expect(res.body.error).toMatchObject({ jobId: 'job-1', qty: 6, jobQty: 5 });
    expect((await receiver.journal()).map((e) => e.outcome)).toEqual(['applied']);
  });

  test('a stale lease with the wrong qty is 409 stale_lease: the lease is judged before the qty', async () => {
    const { app, receiver, leased, clock } = await setup();
    const lease = await leased('job-1', 5, 'w1', 1_000);
    clock.advance(1_000);
    const res = await request(app).post('/send').send({ jobId: 'job-1', owner: 'w1', token: lease.token, qty: 6 });
    expectError(res, 409, 'stale_lease');
    expect(res.body.error.reason).toBe('lease_expired');
    expect(await receiver.journal()).toEqual([]);
  });

  test('a qty_mismatch is logged as a refusal, with no attempts', async () => {
    const lines: string[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(line) });
    const { app, leased } = await setup({ gateway: { logger } });
    const lease = await leased('job-1', 3);
    expectError(
      await request(app).post('/send').send({ jobId: 'job-1', owner: 'w1', token: lease.token, qty: 5 }),
      422,
      'qty_mismatch',
    );
    const entries = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(entries.filter((e) => e.msg === 'refused')).toEqual([
      expect.objectContaining({
        level: 30,
        jobId: 'job-1',
        owner: 'w1',
        token: lease.token,
        outcome: 'qty_mismatch',
        status: 422,
        attempts: 0,
      }),
    ]);
  });

  test('an unknown job is 404 unknown_job', async () => {
    const { app, receiver } = await setup();
    const res = await request(app).post('/send').send({ jobId: 'nope', owner: 'w1', token: 1, qty: 5 });
    expectError(res, 404, 'unknown_job');
    expect(await receiver.journal()).toEqual([]);
  });

  const valid = { jobId: 'job-1', owner: 'w1', token: 1, qty: 5 };
  test.each([
    ['jobId missing', { owner: 'w1', token: 1, qty: 5 }, 'jobId is required'],
    ['empty jobId', { ...valid, jobId: '' }, 'jobId must not be empty'],
    ['empty owner', { ...valid, owner: '' }, 'owner must not be empty'],
    ['owner a number', { ...valid, owner: 3 }, 'owner must be'],
    ['token 0', { ...valid, token: 0 }, 'token must be >= 1'],
    ['token fractional', { ...valid, token: 1.5 }, 'token must be a safe integer'],
    ['token unsafe integer', { ...valid, token: 2 ** 53 }, 'token must be a safe integer'],
    ['token as a string', { ...valid, token: '1' }, 'token must be a safe integer'],
    ['qty 0', { ...valid, qty: 0 }, 'qty must be >= 1'],
    ['qty negative', { ...valid, qty: -2 }, 'qty must be >= 1'],
    ['unknown field', { ...valid, tokn: 1 }, 'unknown field "tokn"'],
    ['an array', [valid], 'JSON object'],
  ])('%s is 400 invalid_request and nothing is forwarded', async (_name, body, phrase) => {
    const { app, receiver, leased } = await setup();
    await leased('job-1', 5);
    const res = await request(app)
      .post('/send')
      .send(body as object);
    expectError(res, 400, 'invalid_request');
    expect(res.body.error.message).toContain(phrase);
    expect(await receiver.journal()).toEqual([]);
  });

  test('broken JSON is 400; a body over 1 MiB is 413 payload_too_large', async () => {
    const { app } = await setup();
    const broken = await request(app).post('/send').set('content-type', 'application/json').send('{"jobId": "a",');
    expectError(broken, 400, 'invalid_request');
    const big = await request(app)
      .post('/send')
      .send({ jobId: 'x'.repeat(1024 * 1024 + 1), owner: 'w1', token: 1, qty: 1 });
    expectError(big, 413, 'payload_too_large');
  });

  test('a charset or Content-Encoding it cannot read is 415 unsupported_media_type', async () => {
    const { app, receiver } = await setup();
    const body = JSON.stringify({ jobId: 'job-1', owner: 'w1', token: 1, qty: 5 });
    const charset = await request(app).post('/send').set('content-type', 'application/json; charset=latin1').send(body);
    expectError(charset, 415, 'unsupported_media_type');
    const encoding = await request(app)
      .post('/send')
      .set('content-type', 'application/json')
      .set('content-encoding', 'compress')
      .send(body);
    expectError(encoding, 415, 'unsupported_media_type');
    expect(await receiver.journal()).toEqual([]);
  });

  test('GET /healthz is 200; unknown routes are 404 with the error body', async () => {
    const { app } = await setup();
    expect((await request(app).get('/healthz')).status).toBe(200);
    expectError(await request(app).get('/send'), 404, 'not_found');
    expectError(await request(app).post('/effects').send({}), 404, 'not_found');
  });
});

describe('gateway: a queue in WAL, whose lease checks read on a connection of their own', () => {
  test('a stale worker is refused, the holder goes through, and a finish the queue answered is seen by the next check', async () => {
    const { app, receiver, leased, claim, clock, queueClient } = await setup({ queueJournal: 'wal' });
    const old = await leased('job-1', 5, 'w1', 1_000);
    clock.advance(1_000);
    const current = await claim('w2');

    const stale = await request(app).post('/send').send({ jobId: 'job-1', owner: 'w1', token: old.token, qty: 5 });
    expectError(stale, 409, 'stale_lease');
    expect(stale.body.error.reason).toBe('token_mismatch');
    const ok = await request(app).post('/send').send({ jobId: 'job-1', owner: 'w2', token: current.token, qty: 5 });
    expect(ok.body).toMatchObject({ outcome: 'applied', effect: { token: current.token } });

    await queueClient.finish('job-1', { owner: 'w2', token: current.token });
    const after = await request(app).post('/send').send({ jobId: 'job-1', owner: 'w2', token: current.token, qty: 5 });
    expectError(after, 409, 'stale_lease');
    expect(after.body.error.current).toMatchObject({ status: 'done' });
    expect((await receiver.journal()).map((e) => [e.token, e.outcome])).toEqual([[current.token, 'applied']]);
  });
});

describe('gateway: signatures', () => {
  test('with the same secret on both, forwarded requests are signed and accepted', async () => {
    const { app, receiver, leased } = await setup({ gateway: { secret: 's3cret' }, receiverSecret: 's3cret' });
    const lease = await leased('job-1', 5);
    const res = await request(app).post('/send').send({ jobId: 'job-1', owner: 'w1', token: lease.token, qty: 5 });
    expect({ status: res.status, outcome: res.body.outcome }, JSON.stringify(res.body)).toEqual({
      status: 200,
      outcome: 'applied',
    });
    // The receiver really checks: an unsigned request straight to it is refused.
    const unsigned = await request(receiver.url)
      .post('/effects')
      .set('Fencing-Token', '1')
      .send({ jobId: 'job-1', qty: 5 });
    expect(unsigned.status).toBe(401);
    // And one signed with the shared secret, as the gateway does, is accepted.
    const raw = JSON.stringify({ jobId: 'job-1', qty: 5 });
    const signed = await request(receiver.url)
      .post('/effects')
      .set('Fencing-Token', '1')
      .set(
        'Leasehold-Signature',
        signatureHeader('s3cret', { method: 'POST', path: '/effects', token: 1, body: raw }, Date.now()),
      )
      .set('content-type', 'application/json')
      .send(raw);
    expect(signed.status).toBe(200);
  });

  test('a receiver with a different secret: 502 upstream_rejected saying the secrets differ, not retried', async () => {
    const { app, receiver, leased } = await setup({ gateway: { secret: 'one' }, receiverSecret: 'two' });
    const lease = await leased('job-1', 5);
    const res = await request(app).post('/send').send({ jobId: 'job-1', owner: 'w1', token: lease.token, qty: 5 });
    expectError(res, 502, 'upstream_rejected');
    expect(res.body.error).toMatchObject({ attempts: 1, upstream: { status: 401, code: 'invalid_signature' } });
    expect(res.body.error.message).toContain('must share one secret');
    expect(await receiver.effects()).toEqual([]);
  });

  test('a receiver that wants signatures and a gateway without a secret: 502 saying the gateway has none', async () => {
    const { app, leased } = await setup({ receiverSecret: 'two' });
    const lease = await leased('job-1', 5);
    const res = await request(app).post('/send').send({ jobId: 'job-1', owner: 'w1', token: lease.token, qty: 5 });
    expectError(res, 502, 'upstream_rejected');
    expect(res.body.error.message).toContain('the gateway has no secret');
  });
});

describe("gateway: a qty too large for the receiver's totals", () => {
  const MAX = Number.MAX_SAFE_INTEGER;

  test('a keyed effect: 502 upstream_rejected whose advice is the qty, not --receiver; not retried', async () => {
    const { app, receiver, leased } = await setup();
    const lease = await leased('a', 1);
    const who = { jobId: 'a', owner: 'w1', token: lease.token };
    expect(
      (
        await request(app)
          .post('/send')
          .send({ ...who, qty: 1 })
      ).status,
    ).toBe(200);
    const res = await request(app)
      .post('/send')
      .send({ ...who, key: 'big', qty: MAX });
    expectError(res, 502, 'upstream_rejected');
    expect(res.body.error).toMatchObject({
      attempts: 1,
      upstream: { status: 400, code: 'invalid_request' },
      jobId: 'a',
      key: 'big',
      qty: MAX,
      totalQty: 1,
    });
    const { message } = res.body.error as { message: string };
    expect(message).toBe(
      `The receiver refused effect "big" of job "a" with 400 invalid_request, so nothing was applied: its qty ${MAX} would take the sum of the quantities applied there (1) past ${MAX}, the most its totals can hold. The send's qty is the problem, not the gateway's configuration, and the same send is refused again: send the effect with a smaller qty, or with a body and no qty.`,
    );
    expect(message).not.toContain('--receiver');
    expect(await receiver.totals()).toEqual({ effects: 1, qty: 1 });
  });

  test("the default effect, whose qty is the job's: the advice is to enqueue the job again with its right qty", async () => {
    const { app, leased } = await setup();
    const small = await leased('small', 1);
    expect(
      (await request(app).post('/send').send({ jobId: 'small', owner: 'w1', token: small.token, qty: 1 })).status,
    ).toBe(200);
    const huge = await leased('huge', MAX);
    const res = await request(app).post('/send').send({ jobId: 'huge', owner: 'w1', token: huge.token, qty: MAX });
    expectError(res, 502, 'upstream_rejected');
    expect(res.body.error).toMatchObject({ jobId: 'huge', qty: MAX, totalQty: 1 });
    expect(res.body.error.message).toContain(
      `The receiver refused job "huge"'s default effect with 400 invalid_request`,
    );
    expect(res.body.error.message).toContain(
      'the default effect\'s qty is the job\'s, so cancel job "huge" and enqueue it again with the qty it should have.',
    );
    expect(res.body.error.message).not.toContain('--receiver');
  });
});

describe('gateway: unreachable services', () => {
  test('a queue that cannot be reached is 503 queue_unavailable, and nothing is forwarded', async () => {
    const { app, receiver, queue, leased } = await setup();
    const lease = await leased('job-1', 5);
    await queue.close();
    const res = await request(app).post('/send').send({ jobId: 'job-1', owner: 'w1', token: lease.token, qty: 5 });
    expectError(res, 503, 'queue_unavailable');
    expect(res.body.error.message).toContain('could not be reached');
    expect(await receiver.journal()).toEqual([]);
  });

  test('nothing listening at the receiver URL: 502 after every attempt was refused, within the budget', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const { port } = closed.address() as AddressInfo;
    await new Promise<void>((resolve) => closed.close(() => resolve()));

    const { app, leased } = await setup({ gateway: { receiverUrl: `http://127.0.0.1:${port}`, retryBudgetMs: 5_000 } });
    const lease = await leased('job-1', 5);
    const started = Date.now();
    const res = await request(app).post('/send').send({ jobId: 'job-1', owner: 'w1', token: lease.token, qty: 5 });
    expect(Date.now() - started).toBeLessThan(5_000);
    expectError(res, 502, 'upstream_unavailable');
    expect(res.body.error.message).toContain('refused the connection on 3 attempts');
    expect(res.body.error.failures.map((f: { kind: string }) => f.kind)).toEqual(['refused', 'refused', 'refused']);
  });
});
