// The receiver's HTTP API through supertest (no listen): every outcome, every read route, and
// each kind of bad input — which must answer 4xx with a code and message and change nothing.
import { describe, expect, test } from 'vitest';
import request from 'supertest';
import { createReceiverApp, FaultController } from '../../receiver/index.js';
import { fakeClock } from '../helpers/clock.js';
import { expectError, snapshot, sqliteStore } from './setup.js';

async function setup(options: { testMode?: boolean } = {}) {
  const clock = fakeClock(1_000_000);
  const { store } = await sqliteStore();
  const app = createReceiverApp({ store, clock, faults: options.testMode ? new FaultController() : undefined });
  const http = () => request(app);
  const post = (jobId: string, qty: number, token: number | string) =>
    http().post('/effects').set('Fencing-Token', String(token)).send({ jobId, qty });
  return { app, http, post, store, clock };
}

describe('receiver HTTP: outcomes', () => {
  test('first request 201 applied with the effect', async () => {
    const { post } = await setup();
    const res = await post('a', 5, 3);
    expect({ status: res.status, body: res.body }).toEqual({
      status: 201,
      body: { outcome: 'applied', effect: { jobId: 'a', qty: 5, token: 3, appliedAt: 1_000_000 } },
    });
    expect(res.headers['idempotent-replayed']).toBeUndefined();
  });

  test('same qty with equal or higher token: 200 duplicate + Idempotent-Replayed, nothing added', async () => {
    const { post, http, clock } = await setup();
    await post('a', 5, 3);
    clock.advance(50);
    for (const token of [3, 4]) {
      const res = await post('a', 5, token);
      expect({ status: res.status, body: res.body }).toEqual({
        status: 200,
        body: { outcome: 'duplicate', effect: { jobId: 'a', qty: 5, token: 3, appliedAt: 1_000_000 } },
      });
      expect(res.headers['idempotent-replayed']).toBe('true');
    }
    expect((await http().get('/totals')).body).toEqual({ effects: 1, qty: 5 });
  });

  test('lower token after the effect was applied: 409 fenced with highestToken, even with the same qty', async () => {
    const { post, store } = await setup();
    await post('a', 5, 3);
    await post('a', 5, 6);
    const before = await snapshot(store);
    const res = await post('a', 5, 4);
    expectError(res, 409, 'fenced');
    expect(res.body.error).toMatchObject({ highestToken: 6, token: 4, jobId: 'a' });
    const after = await snapshot(store);
    expect(after.effects).toEqual(before.effects);
    expect(after.journal.slice(before.journal.length).map((e) => e.outcome)).toEqual(['fenced']);
  });

  test('lower token with a different qty is fenced, not conflict', async () => {
    const { post } = await setup();
    await post('a', 5, 3);
    expectError(await post('a', 6, 2), 409, 'fenced');
  });

  test('different qty with token >= highest: 422 conflict with the recorded effect', async () => {
    const { post } = await setup();
    await post('a', 5, 3);
    const res = await post('a', 6, 3);
    expectError(res, 422, 'conflict');
    expect(res.body.error.effect).toEqual({ jobId: 'a', qty: 5, token: 3, appliedAt: 1_000_000 });
    expect(res.body.error.qty).toBe(6);
  });

  test('rejected requests do not raise the highest token', async () => {
    const { post } = await setup();
    await post('a', 5, 3);
    expectError(await post('a', 6, 9), 422, 'conflict');
    expect((await post('a', 5, 4)).status).toBe(200);
  });
});

describe('receiver HTTP: reads', () => {
  test('GET /effects, /effects/:jobId, /totals, /journal, /healthz', async () => {
    const { post, http, clock } = await setup();
    await post('a', 5, 3);
    clock.advance(1);
    await post('b/c d', 2, 1);
    await post('a', 5, 2);

    expect((await http().get('/healthz')).status).toBe(200);
    expect((await http().get('/effects')).body).toEqual({
      effects: [
        { jobId: 'a', qty: 5, token: 3, appliedAt: 1_000_000 },
        { jobId: 'b/c d', qty: 2, token: 1, appliedAt: 1_000_001 },
      ],
      next: null,
    });
    const one = await http().get(`/effects/${encodeURIComponent('b/c d')}`);
    expect({ status: one.status, body: one.body }).toEqual({
      status: 200,
      body: { effect: { jobId: 'b/c d', qty: 2, token: 1, appliedAt: 1_000_001 } },
    });
    expectError(await http().get('/effects/nope'), 404, 'unknown_effect');
    expect((await http().get('/totals')).body).toEqual({ effects: 2, qty: 7 });
    expect((await http().get('/journal')).body).toEqual({
      journal: [
        { seq: 1, jobId: 'a', qty: 5, token: 3, outcome: 'applied', at: 1_000_000 },
        { seq: 2, jobId: 'b/c d', qty: 2, token: 1, outcome: 'applied', at: 1_000_001 },
        { seq: 3, jobId: 'a', qty: 5, token: 2, outcome: 'fenced', at: 1_000_001 },
      ],
      next: null,
    });
  });

  test('an admin body in a charset it cannot read is 415 unsupported_media_type', async () => {
    const { http } = await setup({ testMode: true });
    const res = await http()
      .post('/admin/faults')
      .set('content-type', 'application/json; charset=latin1')
      .send('{"kind":"drop"}');
    expectError(res, 415, 'unsupported_media_type');
    expect((await http().get('/admin/faults')).body).toEqual({ faults: [] });
  });

  test('unknown routes and methods are 404 not_found; admin routes exist only in test mode', async () => {
    const { http } = await setup();
    expectError(await http().get('/nope'), 404, 'not_found');
    expectError(await http().put('/effects'), 404, 'not_found');
    expectError(await http().post('/admin/reset'), 404, 'not_found');
    expectError(await http().post('/admin/faults').send({ kind: 'drop' }), 404, 'not_found');
  });
});

describe('receiver HTTP: bad input changes nothing', () => {
  const json = (value: unknown) => JSON.stringify(value);
  const cases: Array<[string, Record<string, string>, string, number, string]> = [
    ['missing token header', {}, json({ jobId: 'a', qty: 1 }), 400, 'invalid_request'],
    ['empty token header', { 'Fencing-Token': '' }, json({ jobId: 'a', qty: 1 }), 400, 'invalid_request'],
    ['non-integer token', { 'Fencing-Token': 'abc' }, json({ jobId: 'a', qty: 1 }), 400, 'invalid_request'],
    ['fractional token', { 'Fencing-Token': '1.5' }, json({ jobId: 'a', qty: 1 }), 400, 'invalid_request'],
    ['negative token', { 'Fencing-Token': '-1' }, json({ jobId: 'a', qty: 1 }), 400, 'invalid_request'],
    ['token 0', { 'Fencing-Token': '0' }, json({ jobId: 'a', qty: 1 }), 400, 'invalid_request'],
    [
      'token beyond 2^53 - 1',
      { 'Fencing-Token': '9007199254740992' },
      json({ jobId: 'a', qty: 1 }),
      400,
      'invalid_request',
    ],
    ['qty missing', { 'Fencing-Token': '1' }, json({ jobId: 'a' }), 400, 'invalid_request'],
    ['qty 0', { 'Fencing-Token': '1' }, json({ jobId: 'a', qty: 0 }), 400, 'invalid_request'],
    ['qty negative', { 'Fencing-Token': '1' }, json({ jobId: 'a', qty: -3 }), 400, 'invalid_request'],
    ['qty fractional', { 'Fencing-Token': '1' }, json({ jobId: 'a', qty: 1.5 }), 400, 'invalid_request'],
    ['qty a string', { 'Fencing-Token': '1' }, json({ jobId: 'a', qty: '1' }), 400, 'invalid_request'],
    ['qty beyond 2^53 - 1', { 'Fencing-Token': '1' }, '{"jobId":"a","qty":9007199254740993}', 400, 'invalid_request'],
    ['jobId missing', { 'Fencing-Token': '1' }, json({ qty: 1 }), 400, 'invalid_request'],
    ['jobId empty', { 'Fencing-Token': '1' }, json({ jobId: '', qty: 1 }), 400, 'invalid_request'],
    ['jobId a number', { 'Fencing-Token': '1' }, json({ jobId: 7, qty: 1 }), 400, 'invalid_request'],
    [
      'jobId over 256 characters',
      { 'Fencing-Token': '1' },
      json({ jobId: 'j'.repeat(257), qty: 1 }),
      400,
      'invalid_request',
    ],
    ['unknown field', { 'Fencing-Token': '1' }, json({ jobId: 'a', qty: 1, qyt: 2 }), 400, 'invalid_request'],
    ['broken JSON', { 'Fencing-Token': '1' }, '{"jobId":"a",', 400, 'invalid_request'],
    ['JSON array', { 'Fencing-Token': '1' }, '[1,2]', 400, 'invalid_request'],
    ['empty body', { 'Fencing-Token': '1' }, '', 400, 'invalid_request'],
    [
      'unreadable Content-Encoding',
      { 'Fencing-Token': '1', 'Content-Encoding': 'compress' },
      json({ jobId: 'a', qty: 1 }),
      415,
      'unsupported_media_type',
    ],
    [
      'body over 1 MiB',
      { 'Fencing-Token': '1' },
      json({ jobId: 'a', qty: 1, pad: 'x'.repeat(1024 * 1024) }),
      413,
      'payload_too_large',
    ],
  ];

  test.each(cases)('%s → %i %s', async (_name, headers, body, status, code) => {
    const { http, post, store } = await setup();
    await post('a', 5, 3);
    const before = await snapshot(store);
    const res = await http().post('/effects').set('Content-Type', 'application/json').set(headers).send(body);
    expectError(res, status, code);
    expect(await snapshot(store)).toEqual(before);
  });

  test('a body of exactly 1 MiB is accepted', async () => {
    const { http } = await setup();
    const json = '{"jobId":"big","qty":1}';
    const body = `${json}${' '.repeat(1024 * 1024 - json.length)}`; // JSON allows trailing white space
    expect(Buffer.byteLength(body)).toBe(1024 * 1024);
    const res = await http()
      .post('/effects')
      .set('Fencing-Token', '1')
      .set('Content-Type', 'application/json')
      .send(body);
    expect({ status: res.status, outcome: res.body.outcome }).toEqual({ status: 201, outcome: 'applied' });
  });

  test('the error message names what is wrong', async () => {
    const { post } = await setup();
    const res = await post('a', 1.5, 1);
    expect(res.body.error.message).toMatch(/qty must be a positive safe integer/);
    expect(res.body.error.issues).toEqual([{ path: 'qty', message: expect.stringMatching(/qty/) }]);
    expect((await post('a', 1, 'x')).body.error).toMatchObject({
      field: 'Fencing-Token',
      message: expect.stringMatching(/Fencing-Token/),
    });
  });
});
