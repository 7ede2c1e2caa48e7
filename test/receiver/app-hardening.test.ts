// The receiver against hostile and careless requests, on both dialects where storage is
// involved: ids a database would store alike or refuse, paths that are not percent-encoding,
// bodies that are not JSON, too deep or fail to decompress, sums past 2^53 - 1, listings that
// would grow with the tables; and test mode, which is never on for a database that outlives the
// process unless asked for. Each refusal is a 4xx that changes nothing.
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import request from 'supertest';
import { describe, expect, test } from 'vitest';
import {
  createReceiverApp,
  FaultController,
  openPostgresEffectStore,
  ReceiverClient,
  startReceiver,
  type EffectStore,
} from '../../receiver/index.js';
import { fakeClock } from '../helpers/clock.js';
import { testSchema } from '../helpers/postgres.js';
import { tempDir } from '../helpers/tmp.js';
import { closeAfterTest, expectError, snapshot, sqliteStore } from './setup.js';

const dialects: Record<string, () => Promise<EffectStore<unknown>>> = {
  sqlite: async () => (await sqliteStore()).store as EffectStore<unknown>,
  postgres: async () => {
    const store = await openPostgresEffectStore({ connectionString: testSchema('lh_rh').url });
    closeAfterTest(() => store.close());
    return store as EffectStore<unknown>;
  },
};

describe.each(Object.keys(dialects))('receiver hardening: %s', (dialect) => {
  async function setup() {
    const store = await dialects[dialect]!();
    const clock = fakeClock(1_000_000);
    const app = createReceiverApp({ store, clock });
    const post = (body: string, headers: Record<string, string> = {}) =>
      request(app)
        .post('/effects')
        .set('content-type', 'application/json')
        .set('fencing-token', '1')
        .set(headers)
        .send(body);
    return { store, app, http: () => request(app), post };
  }

  test.each([
    ['a lone surrogate', 'a\ud800'],
    ['a NUL', 'a\u0000'],
    ['"."', '.'],
    ['".."', '..'],
  ])('a jobId with %s is 400, and nothing is recorded or journaled', async (_name, jobId) => {
    const { store, post } = await setup();
    const before = await snapshot(store);
    expectError(await post(JSON.stringify({ jobId, qty: 1 })), 400, 'invalid_request');
    expect(await snapshot(store)).toEqual(before);
  });

  test('a 256-character jobId is applied, read back by path, and its duplicate recognised', async () => {
    const { post, http } = await setup();
    const jobId = 'j'.repeat(256);
    expect((await post(JSON.stringify({ jobId, qty: 2 }))).status).toBe(201);
    expect((await post(JSON.stringify({ jobId, qty: 2 }))).status).toBe(200);
    expect((await http().get(`/effects/${jobId}`)).body.effect).toMatchObject({ jobId, qty: 2 });
  });

  test.each([
    ['/effects/%ZZ', 'not valid percent-encoding'],
    ['/effects/%ED%A0%80', 'not valid percent-encoding'],
    ['/effects/%00', 'NUL'],
    ['/effects/%2E%2E', '"." or ".."'],
  ])('GET %s is 400 saying why, never 500', async (path, reason) => {
    const { http } = await setup();
    const res = await http().get(path);
    expectError(res, 400, 'invalid_request');
    expect(res.body.error.message).toContain(reason);
  });

  test('an effect whose qty would take the total past 2^53 - 1 is 400; GET /totals stays exact', async () => {
    const { post, http, store } = await setup();
    const max = Number.MAX_SAFE_INTEGER;
    expect((await post(JSON.stringify({ jobId: 'a', qty: max }))).status).toBe(201);
    const before = await snapshot(store);
    const res = await post(JSON.stringify({ jobId: 'b', qty: 1 }));
    expectError(res, 400, 'invalid_request');
    expect(res.body.error.message).toBe(
      `The effect for job "b" was not applied: its qty 1 would take the sum of applied quantities (${max}) past ${max}, the largest sum GET /totals can report exactly. Send it with a smaller qty.`,
    );
    // The gateway tells this refusal from a configuration problem by `totalQty`.
    expect(res.body.error).toMatchObject({ jobId: 'b', qty: 1, totalQty: max });
    expect(await snapshot(store)).toEqual(before);
    expect((await http().get('/totals')).body).toEqual({ effects: 1, qty: max });
  });
});

describe('receiver hardening: bodies', () => {
  async function setup() {
    const { store } = await sqliteStore();
    const app = createReceiverApp({ store, clock: fakeClock(1_000_000) });
    return { store, app };
  }

  test.each([
    ['text/plain (a cross-site "simple" request)', { 'content-type': 'text/plain' }],
    ['a form', { 'content-type': 'application/x-www-form-urlencoded' }],
    ['no Content-Type at all', {}],
  ])('a body sent as %s is 415 and nothing is recorded', async (_name, type) => {
    const { store, app } = await setup();
    const before = await snapshot(store);
    const res = await raw(app, {
      headers: { 'fencing-token': '1', ...type },
      body: Buffer.from(JSON.stringify({ jobId: 'a', qty: 1 })),
    });
    expect({ status: res.status, code: res.body.error?.code }).toEqual({ status: 415, code: 'unsupported_media_type' });
    expect(await snapshot(store)).toEqual(before);
  });

  test('a body that claims gzip but is not gzip is 400; JSON deeper than 64 levels is 400', async () => {
    const { store, app } = await setup();
    const before = await snapshot(store);
    const gzip = await raw(app, {
      headers: { 'fencing-token': '1', 'content-type': 'application/json', 'content-encoding': 'gzip' },
      body: Buffer.from('{"jobId":"a","qty":1}'),
    });
    expect({ status: gzip.status, code: gzip.body.error?.code }).toEqual({ status: 400, code: 'invalid_request' });
    const deep = await request(app)
      .post('/effects')
      .set('content-type', 'application/json')
      .set('fencing-token', '1')
      .send(`{"jobId":${'['.repeat(10_000)}${']'.repeat(10_000)},"qty":1}`);
    expectError(deep, 400, 'invalid_request');
    expect(deep.body.error.message).toMatch(/more than 64 levels deep/);
    expect(await snapshot(store)).toEqual(before);
  });
});

describe('receiver: listings a page at a time', () => {
  test('GET /effects and GET /journal: limit (default 100, at most 1000), after, next', async () => {
    const { store } = await sqliteStore();
    const app = createReceiverApp({ store, clock: fakeClock(1_000_000) });
    const http = () => request(app);
    const ids = Array.from({ length: 105 }, (_, i) => `job-${String(i).padStart(3, '0')}`);
    for (const jobId of ids) {
      await http().post('/effects').set('fencing-token', '1').send({ jobId, qty: 1 });
    }
    const first = await http().get('/effects');
    expect(first.body.effects.map((e: { jobId: string }) => e.jobId)).toEqual(ids.slice(0, 100));
    expect(first.body.next).toBe('job-099');
    const rest = await http().get('/effects').query({ after: first.body.next });
    expect(rest.body).toMatchObject({ next: null });
    expect(rest.body.effects.map((e: { jobId: string }) => e.jobId)).toEqual(ids.slice(100));
    const two = await http().get('/effects').query({ limit: 2, after: 'job-050' });
    expect(two.body.effects.map((e: { jobId: string }) => e.jobId)).toEqual(['job-051', 'job-052']);
    expect(two.body.next).toBe('job-052');

    const journal = await http().get('/journal').query({ limit: 1000 });
    expect(journal.body.journal).toHaveLength(105);
    expect(journal.body.next).toBeNull();
    const page = await http().get('/journal').query({ limit: 5, after: journal.body.journal[99].seq });
    expect(page.body.journal).toEqual(journal.body.journal.slice(100));
    expect(page.body.next).toBeNull();

    for (const query of [{ limit: 1001 }, { limit: 0 }, { limit: 'x' }, { after: '' }, { colour: 'red' }]) {
      expectError(await http().get('/effects').query(query), 400, 'invalid_request');
    }
    expectError(await http().get('/journal').query({ after: -1 }), 400, 'invalid_request');
  });

  test('ReceiverClient reads whole listings page by page, and one page when asked', async () => {
    const receiver = await startReceiver();
    closeAfterTest(() => receiver.close());
    const client = new ReceiverClient(receiver.url);
    closeAfterTest(async () => client.close());
    for (let i = 0; i < 1_203; i += 1) {
      await client.record({ jobId: `j${String(i).padStart(4, '0')}`, qty: 1 }, { token: 1 });
    }
    expect(await client.effects()).toHaveLength(1_203);
    expect(await client.journal()).toHaveLength(1_203);
    const page = await client.effectsPage({ limit: 3, after: 'j0010' });
    expect({ ids: page.effects.map((e) => e.jobId), next: page.next }).toEqual({
      ids: ['j0011', 'j0012', 'j0013'],
      next: 'j0013',
    });
    expect((await client.journalPage({ limit: 2 })).journal.map((entry) => entry.seq)).toEqual([1, 2]);
  });
});

describe('receiver: test mode only when asked', () => {
  test('a receiver on a file has no /admin routes and no fault injection unless testMode is true', async () => {
    const db = join(tempDir('leasehold-testmode-'), 'receiver.sqlite');
    const plain = await startReceiver({ db });
    closeAfterTest(() => plain.close());
    expectError(await request(plain.url).post('/admin/reset'), 404, 'not_found');
    expect(() => plain.faults.fail()).toThrow(/testMode/);
    await plain.close();

    const asked = await startReceiver({ db, testMode: true });
    closeAfterTest(() => asked.close());
    expect((await request(asked.url).post('/admin/reset').send({})).status).toBe(200);
  });

  test('a cross-site form or text/plain post cannot reset a test-mode receiver or clear its faults: 415', async () => {
    const stub = await startReceiver({ testMode: true });
    closeAfterTest(() => stub.close());
    const client = new ReceiverClient(stub.url);
    closeAfterTest(async () => client.close());
    await client.record({ jobId: 'kept', qty: 2 }, { token: 3 });
    expect((await request(stub.url).post('/admin/faults').send({ kind: 'drop' })).status).toBe(200);
    const simple: Array<[string, string | undefined, string | undefined]> = [
      ['no body, no type', undefined, undefined],
      ['text/plain', 'text/plain', '{}'],
      ['a form', 'application/x-www-form-urlencoded', 'a=1'],
      ['multipart', 'multipart/form-data; boundary=x', '--x--'],
    ];
    for (const [name, type, body] of simple) {
      for (const [method, path] of [
        ['post', '/admin/reset'],
        ['delete', '/admin/faults'],
        ['post', '/admin/faults'],
      ] as const) {
        let req = request(stub.url)[method](path);
        if (type !== undefined) req = req.set('content-type', type);
        const res = body === undefined ? await req : await req.send(body);
        expect({ status: res.status, code: res.body?.error?.code }, `${method} ${path} with ${name}`).toEqual({
          status: 415,
          code: 'unsupported_media_type',
        });
      }
    }
    // Nothing was reset or cleared.
    expect(await stub.effect('kept')).toMatchObject({ qty: 2, token: 3 });
    expect((await request(stub.url).get('/admin/faults')).body.faults).toHaveLength(1);
    // Declared JSON, they work.
    expect((await request(stub.url).delete('/admin/faults').send({})).body).toEqual({ faults: [] });
    expect((await request(stub.url).post('/admin/reset').send({})).status).toBe(200);
    expect(await stub.effect('kept')).toBeUndefined();
  });

  test('a stub in memory defaults to test mode; testMode: false turns it off', async () => {
    const stub = await startReceiver();
    closeAfterTest(() => stub.close());
    expect((await request(stub.url).get('/admin/faults')).status).toBe(200);
    const off = await startReceiver({ testMode: false });
    closeAfterTest(() => off.close());
    expectError(await request(off.url).get('/admin/faults'), 404, 'not_found');
  });

  test('/admin/faults takes at most 1000 faults queued and delays of at most 60 s', async () => {
    const stub = await startReceiver();
    closeAfterTest(() => stub.close());
    const add = (body: object) => request(stub.url).post('/admin/faults').send(body);
    expectError(await add({ kind: 'drop', count: 1_001 }), 400, 'invalid_request');
    expectError(await add({ kind: 'delay', ms: 60_001 }), 400, 'invalid_request');
    expect((await add({ kind: 'delay', ms: 60_000, count: 600 })).status).toBe(200);
    const tooMany = await add({ kind: 'drop', count: 401 });
    expectError(tooMany, 400, 'invalid_request');
    expect(tooMany.body.error.message).toMatch(/At most 1000 faults may be queued/);
    expect((await add({ kind: 'drop', count: 400 })).body.faults).toHaveLength(1_000);
    expectError(await add({ kind: 'fail' }), 400, 'invalid_request');
    expect(() => new FaultController().add({ kind: 'drop', count: 1_001 })).toThrow(/count|1000/);
  });
});

/** One POST /effects through a real socket, the body's bytes as given (supertest would re-encode them). */
async function raw(
  app: ReturnType<typeof createReceiverApp>,
  init: { headers: Record<string, string>; body: Buffer },
): Promise<{ status: number; body: { error?: { code: string } } }> {
  const server = app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  try {
    const { port } = server.address() as AddressInfo;
    const res = await fetch(`http://127.0.0.1:${port}/effects`, { method: 'POST', ...init });
    return { status: res.status, body: (await res.json()) as { error?: { code: string } } };
  } finally {
    server.close();
  }
}
