// The batch extension of POST /effects through the HTTP app: each effect of a batch answered
// with the status and body its own request would have had, judged in one transaction; the
// Leasehold-Batch header that offers it; bad batches; and its signatures, which never verify as
// a single effect's nor the reverse.
import express from 'express';
import { pino } from 'pino';
import request from 'supertest';
import { describe, expect, test } from 'vitest';
import {
  createReceiverApp,
  fencedEffects,
  receiverErrors,
  signatureHeader,
  type EffectStore,
} from '../../receiver/index.js';
import { fakeClock } from '../helpers/clock.js';
import { capturedLogger, expectError, snapshot, sqliteStore } from './setup.js';

const SECRET = 'batch-secret';

async function setup(options: { secret?: string } = {}) {
  const clock = fakeClock(1_000_000);
  const { store } = await sqliteStore();
  const app = createReceiverApp({ store, clock, ...options });
  return { app, store, clock };
}

type Item = { jobId: string; key?: string; qty?: number; body?: unknown; token: unknown };

const postBatch = (app: express.Express, effects: unknown, path = '/effects?batch') =>
  request(app).post(path).set('Content-Type', 'application/json').send(JSON.stringify({ effects }));

const postOne = (app: express.Express, item: Item) => {
  const { token, ...fields } = item;
  return request(app).post('/effects').set('Fencing-Token', String(token)).send(fields);
};

describe('receiver HTTP: batches', () => {
  test('every answer of POST /effects names the batch target in Leasehold-Batch, refusals included', async () => {
    const { app } = await setup();
    const applied = await postOne(app, { jobId: 'a', qty: 1, token: 1 });
    const refused = await request(app).post('/effects').send({ jobId: 'a', qty: 1 });
    const batch = await postBatch(app, [{ jobId: 'a', qty: 1, token: 1 }]);
    expect([applied, refused, batch].map((res) => [res.status, res.headers['leasehold-batch']])).toEqual([
      [201, '/effects?batch'],
      [400, '/effects?batch'],
      [200, '/effects?batch'],
    ]);
  });

  test('mixed outcomes: each effect answered exactly as its own POST /effects, in the order sent', async () => {
    // The same sequence twice: as one batch on one receiver, one request at a time on another.
    const items: Item[] = [
      { jobId: 'b', qty: 2, token: 1 },
      { jobId: 'a', qty: 5, token: 3 },
      { jobId: 'a', qty: 5, token: 2 },
      { jobId: 'a', key: 'other', qty: 1, token: 2 },
      { jobId: 'a', qty: 6, token: 3 },
      { jobId: 'a', key: '', qty: 1, token: 3 },
      { jobId: 'c', qty: 1, token: 0 },
      { jobId: 'd', token: 1 },
      { jobId: 'b', qty: 2, token: 4 },
    ];
    const batched = await setup();
    const single = await setup();
    for (const { app } of [batched, single]) await postOne(app, { jobId: 'a', qty: 5, token: 3 });
    batched.clock.advance(10);
    single.clock.advance(10);
    const res = await postBatch(batched.app, items);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const alone: Array<{ status: number; body: unknown }> = [];
    for (const item of items) {
      const one = await postOne(single.app, item);
      alone.push({ status: one.status, body: one.body });
    }
    // A bad token is a field of the effect here, a header there: the same 400, in its own words.
    const results = res.body.results as Array<{ status: number; body: { error?: { message: string } } }>;
    expect(results.map((r) => r.status)).toEqual([201, 200, 409, 409, 422, 400, 400, 400, 200]);
    expect(results[6]!.body.error!.message).toMatch(/token must be a safe integer >= 1/);
    const comparable = (list: typeof alone) => list.filter((_, i) => i !== 6);
    expect(comparable(results)).toEqual(comparable(alone));
    // The jobs are judged in the order of their ids, each job's effects in the order sent.
    const byJob = async (store: EffectStore) => {
      const { journal, ...rest } = await snapshot(store);
      const entries = journal.map(({ seq: _seq, ...entry }) => entry);
      return { ...rest, journal: entries.sort((x, y) => (x.jobId < y.jobId ? -1 : x.jobId > y.jobId ? 1 : 0)) };
    };
    expect(await byJob(batched.store)).toEqual(await byJob(single.store));
  });

  test('a fencedEffects route elsewhere offers its own target, its query kept', async () => {
    const { store } = await sqliteStore();
    const app = express();
    app.post('/hooks/effects', fencedEffects({ store }));
    app.use(receiverErrors(pinoSilent()));
    const one = await request(app)
      .post('/hooks/effects?tenant=7')
      .set('Fencing-Token', '1')
      .send({ jobId: 'a', qty: 1 });
    expect(one.headers['leasehold-batch']).toBe('/hooks/effects?tenant=7&batch');
    const batch = await postBatch(app, [{ jobId: 'a', qty: 1, token: 1 }], '/hooks/effects?tenant=7&batch');
    expect(batch.body).toEqual({
      results: [
        {
          status: 200,
          body: { outcome: 'duplicate', effect: { jobId: 'a', qty: 1, token: 1, appliedAt: expect.any(Number) } },
        },
      ],
    });
  });

  test('a store without recordMany offers no batches: no header, and ?batch is a single request', async () => {
    const { store } = await sqliteStore();
    const single: EffectStore = { ...store, recordMany: undefined };
    const app = express();
    app.post('/effects', fencedEffects({ store: single }));
    app.use(receiverErrors(pinoSilent()));
    const one = await postOne(app, { jobId: 'a', qty: 1, token: 1 });
    expect(one.status).toBe(201);
    expect(one.headers['leasehold-batch']).toBeUndefined();
    expectError(await postBatch(app, [{ jobId: 'a', qty: 1, token: 1 }]), 400, 'invalid_request');
  });

  test('apply failing for one effect: that effect 500 apply_failed, the others recorded one by one', async () => {
    const { store } = await sqliteStore();
    const { logger, lines } = capturedLogger();
    const app = express();
    app.post(
      '/effects',
      fencedEffects({
        store,
        logger,
        apply: async (effect) => {
          if (effect.jobId === 'bad') throw new Error('cannot ship');
        },
      }),
    );
    app.use(receiverErrors(pinoSilent()));
    const res = await postBatch(app, [
      { jobId: 'ok1', qty: 1, token: 1 },
      { jobId: 'bad', qty: 1, token: 1 },
      { jobId: 'ok2', qty: 1, token: 1 },
    ]);
    expect(
      res.body.results.map((r: { status: number; body: { error?: { code: string } } }) => [
        r.status,
        r.body.error?.code,
      ]),
    ).toEqual([
      [201, undefined],
      [500, 'apply_failed'],
      [201, undefined],
    ]);
    expect((await store.listEffects()).map((e) => e.jobId)).toEqual(['ok1', 'ok2']);
    // Once, for the effect that failed alone; not for the batch's transaction that it failed first.
    expect(
      lines.filter((line) => Number(line.level) >= 50).map((line) => [line.msg, line.jobId]),
      'error lines',
    ).toEqual([['apply failed; the effect was not recorded', 'bad']]);
  });

  test('bad batches are refused whole and change nothing', async () => {
    const { app, store } = await setup();
    const before = await snapshot(store);
    const manyKeys = Object.fromEntries(Array.from({ length: 10_001 }, (_, i) => [`k${i}`, 1]));
    const cases: Array<[string, string, RegExp]> = [
      ['not an object', '[1]', /JSON object/],
      ['no effects', '{}', /effects/],
      ['empty', '{"effects": []}', /at least 1/],
      [
        'too many',
        JSON.stringify({ effects: Array.from({ length: 101 }, () => ({ jobId: 'a', qty: 1, token: 1 })) }),
        /at most 100/,
      ],
      ['another field', '{"effects": [{"jobId": "a", "qty": 1, "token": 1}], "x": 1}', /unknown field "x"/],
      ['__proto__', '{"effects": [{"jobId": "a", "qty": 1, "token": 1, "body": {"__proto__": 1}}]}', /__proto__/],
      [
        'over 10 000 keys',
        JSON.stringify({ effects: [{ jobId: 'a', token: 1, body: manyKeys }] }),
        /object keys, more than 10000/,
      ],
    ];
    for (const [what, body, message] of cases) {
      const res = await request(app).post('/effects?batch').set('Content-Type', 'application/json').send(body);
      expectError(res, 400, 'invalid_request');
      expect(res.body.error.message, what).toMatch(message);
    }
    expect(await snapshot(store)).toEqual(before);
  });

  test('the single route refuses __proto__ and more than 10 000 keys too, before judging', async () => {
    const { app, store } = await setup();
    const proto = await request(app)
      .post('/effects')
      .set('Fencing-Token', '1')
      .set('Content-Type', 'application/json')
      .send('{"jobId": "a", "body": {"__proto__": {"x": 1}}}');
    expectError(proto, 400, 'invalid_request');
    expect(proto.body.error.message).toMatch(/"__proto__"/);
    const manyKeys = Object.fromEntries(Array.from({ length: 10_000 }, (_, i) => [`k${i}`, 1]));
    const many = await postOne(app, { jobId: 'a', body: manyKeys, token: 1 });
    expectError(many, 400, 'invalid_request');
    expect(many.body.error).toMatchObject({ maxKeys: 10_000 });
    expect(await store.journal()).toEqual([]);
  });
});

describe('receiver HTTP: batch signatures', () => {
  const BODY = JSON.stringify({ effects: [{ jobId: 'a', qty: 5, token: 3 }] });
  const SINGLE = JSON.stringify({ jobId: 'a', qty: 5 });
  const signed = (app: express.Express, path: string, body: string, signature: string | undefined, token?: string) => {
    const req = request(app).post(path).set('Content-Type', 'application/json');
    if (token !== undefined) req.set('Fencing-Token', token);
    if (signature !== undefined) req.set('Leasehold-Signature', signature);
    return req.send(body);
  };

  test('a batch signed over "batch" in the token place passes', async () => {
    const { app, clock } = await setup({ secret: SECRET });
    const signature = signatureHeader(
      SECRET,
      { method: 'POST', path: '/effects?batch', token: 'batch', body: BODY },
      clock.now(),
    );
    const res = await signed(app, '/effects?batch', BODY, signature);
    expect(res.body.results?.[0]?.status, JSON.stringify(res.body)).toBe(201);
  });

  test('unsigned, forged, and signatures made for a single effect are 401 on the batch route; the reverse too', async () => {
    const { app, store, clock } = await setup({ secret: SECRET });
    const now = clock.now();
    const sign = (secret: string, path: string, token: number | 'batch', body: string) =>
      signatureHeader(secret, { method: 'POST', path, token, body }, now);
    const cases: Array<[string, () => ReturnType<typeof signed>]> = [
      ['unsigned batch', () => signed(app, '/effects?batch', BODY, undefined)],
      ['forged batch', () => signed(app, '/effects?batch', BODY, sign('guess', '/effects?batch', 'batch', BODY))],
      // A single effect's signature carried over to the batch route, path and all as it was made.
      [
        'single replayed on the batch route',
        () => signed(app, '/effects?batch', SINGLE, sign(SECRET, '/effects', 3, SINGLE), '3'),
      ],
      [
        'single signature with the batch path',
        () => signed(app, '/effects?batch', BODY, sign(SECRET, '/effects?batch', 3, BODY), '3'),
      ],
      [
        'batch signature on the single route',
        () => signed(app, '/effects', SINGLE, sign(SECRET, '/effects?batch', 'batch', SINGLE), '3'),
      ],
      [
        'batch signature for /effects as a single',
        () => signed(app, '/effects', SINGLE, sign(SECRET, '/effects', 'batch', SINGLE), '3'),
      ],
    ];
    for (const [what, send] of cases) {
      const res = await send();
      expect({ what, status: res.status, code: res.body.error?.code }).toEqual({
        what,
        status: 401,
        code: 'invalid_signature',
      });
    }
    expect(await store.journal()).toEqual([]);
  });
});

function pinoSilent() {
  return pino({ level: 'silent' });
}
