// What the queue's edge refuses before a route spends anything on a request: a caller without
// the key is 401 before any body is read, `GET /healthz` alone excepted; an unknown route or
// method is 404 whatever its body; a payload with a `__proto__` key or too many keys is 400; and
// long-polling claims beyond the cap are 503 at once. Each changes nothing. And a listing's page
// is bounded by bytes as well as by count, on a real SQLite file with 1 MB payloads.
import { join } from 'node:path';
import request from 'supertest';
import { afterEach, describe, expect, test } from 'vitest';
import { MAX_JSON_KEYS } from '../../platform/http-edge.js';
import { createQueueApp, openSqliteQueueStore } from '../../queue/index.js';
import { LIST_MAX_BYTES } from '../../queue/schemas.js';
import { fakeClock } from '../helpers/clock.js';
import { tempDir } from '../helpers/tmp.js';
import { expectError, untilClaimsWait } from './app-setup.js';
import { newJobInput } from './store.suite.js';

const closers: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

const KEY = 'queue-edge-key-0123456789';

async function setup(options: { apiKey?: string; maxClaimWaiters?: number } = {}) {
  const store = await openSqliteQueueStore({
    filename: join(tempDir('leasehold-edge-'), 'q.sqlite'),
    clock: fakeClock(1_000_000),
  });
  closers.push(() => store.close());
  const app = createQueueApp({ store, repollMs: 60_000, ...options });
  closers.push(() => app.close());
  const http = () => request(app);
  const auth = options.apiKey === undefined ? {} : { authorization: `Bearer ${options.apiKey}` };
  const stats = async () => (await http().get('/stats').set(auth)).body as Record<string, number>;
  return { http, auth, stats, store };
}

describe('queue edge: the key before the body', () => {
  test('an unkeyed POST /healthz with a broken body is 401, never parsed; GET and HEAD /healthz stay open', async () => {
    const { http } = await setup({ apiKey: KEY });
    for (const method of ['post', 'put', 'delete'] as const) {
      const res = await http()[method]('/healthz').set('content-type', 'application/json').send('{bad');
      expectError(res, 401, 'unauthorized');
    }
    expectError(await http().post('/jobs').set('content-type', 'application/json').send('{bad'), 401, 'unauthorized');
    expect((await http().get('/healthz')).status).toBe(200);
    expect((await http().head('/healthz')).status).toBe(200);
  });

  test('with the key, POST /healthz is an unknown route: 404, its body unread', async () => {
    const { http, auth } = await setup({ apiKey: KEY });
    expectError(
      await http().post('/healthz').set(auth).set('content-type', 'application/json').send('{bad'),
      404,
      'not_found',
    );
  });
});

describe('queue edge: routing before the body', () => {
  test.each([
    ['DELETE /jobs/x without a body', 'delete', '/jobs/x', undefined, undefined],
    ['PUT /jobs with text/plain', 'put', '/jobs', 'text/plain', 'qty=1'],
    ['PATCH /jobs/x with broken JSON', 'patch', '/jobs/x', 'application/json', '{bad'],
    ['POST /nowhere with a form', 'post', '/nowhere', 'application/x-www-form-urlencoded', 'a=1'],
    ['POST /healthz with broken JSON', 'post', '/healthz', 'application/json', '{bad'],
    ['POST /jobs/x (GET only) with broken JSON', 'post', '/jobs/x', 'application/json', '{bad'],
  ] as const)('%s is 404 not_found, naming the method and path', async (_name, method, path, type, body) => {
    const { http, stats } = await setup();
    let req = http()[method](path);
    if (type !== undefined) req = req.set('content-type', type);
    const res = body === undefined ? await req : await req.send(body);
    expectError(res, 404, 'not_found');
    expect(res.body.error.message).toContain(`There is no ${method.toUpperCase()} ${path} on the queue`);
    expect(await stats()).toEqual({ pending: 0, leased: 0, done: 0, dead: 0 });
  });

  test('a known route still holds its body to the JSON rule', async () => {
    const { http } = await setup();
    expectError(
      await http().post('/jobs').set('content-type', 'text/plain').send('{"qty":1}'),
      415,
      'unsupported_media_type',
    );
    expectError(
      await http().post('/jobs').set('content-type', 'application/json').send('{bad'),
      400,
      'invalid_request',
    );
  });
});

describe('queue edge: payload shapes', () => {
  test('a payload with a "__proto__" key is 400, at any depth, and nothing is enqueued', async () => {
    const { http, stats } = await setup();
    for (const body of [
      '{"qty":1,"payload":{"__proto__":{"admin":true}}}',
      '{"qty":1,"payload":{"a":[{"b":1,"__proto__":null}]}}',
      '{"__proto__":{"qty":1},"qty":1}',
    ]) {
      const res = await http().post('/jobs').set('content-type', 'application/json').send(body);
      expectError(res, 400, 'invalid_request');
      expect(res.body.error.message).toContain('"__proto__"');
    }
    expect(await stats()).toEqual({ pending: 0, leased: 0, done: 0, dead: 0 });
    // A key that merely contains the word is kept as sent.
    const kept = await http()
      .post('/jobs')
      .send({ id: 'p', qty: 1, payload: { proto: 1, __proto__x: 2 } });
    expect(kept.status).toBe(201);
    expect(kept.body.job.payload).toEqual({ proto: 1, __proto__x: 2 });
  });

  test(`a body of more than ${MAX_JSON_KEYS} object keys is 400 before it is parsed; exactly ${MAX_JSON_KEYS} is enqueued`, async () => {
    const { http, stats } = await setup();
    const payloadOf = (keys: number) => Object.fromEntries(Array.from({ length: keys }, (_, i) => [`k${i}`, i]));
    // The body's own two keys (qty, payload) count too.
    const over = await http()
      .post('/jobs')
      .send({ qty: 1, payload: payloadOf(MAX_JSON_KEYS - 1) });
    expectError(over, 400, 'invalid_request');
    expect(over.body.error).toMatchObject({ maxKeys: MAX_JSON_KEYS });
    expect(over.body.error.message).toContain(`${MAX_JSON_KEYS + 1} object keys`);
    expect(await stats()).toEqual({ pending: 0, leased: 0, done: 0, dead: 0 });
    const at = await http()
      .post('/jobs')
      .send({ qty: 1, payload: payloadOf(MAX_JSON_KEYS - 2) });
    expect(at.status, JSON.stringify(at.body).slice(0, 300)).toBe(201);
    // Colons and quotes inside strings are not keys.
    const strings = await http()
      .post('/jobs')
      .send({ qty: 1, payload: Array.from({ length: 20_000 }, () => 'a:"b\\":c') });
    expect(strings.status).toBe(201);
  });
});

describe('queue edge: listings bounded by bytes', () => {
  test('GET /jobs?limit=1000 over jobs of 1 MB payloads is a page cut at 16 MiB with next; lean=true lists them all without payloads', async () => {
    const { http, store } = await setup();
    const payload = 'x'.repeat(1_000_000);
    const ids = Array.from({ length: 40 }, (_, i) => `big-${String(i).padStart(2, '0')}`);
    for (const id of ids) await store.enqueue(newJobInput({ id, payload }));

    const first = await http().get('/jobs?limit=1000');
    expect(first.status).toBe(200);
    // 16 payloads of 1,000,002 bytes of JSON text fit in 16 MiB; a 17th would not.
    expect(first.body.jobs).toHaveLength(Math.floor(LIST_MAX_BYTES / 1_000_002));
    expect(first.body.jobs[0].payload).toBe(payload);
    expect(first.body.next).toBe(first.body.jobs.at(-1).id);
    expect(first.text.length).toBeLessThan(LIST_MAX_BYTES + 64 * 1024);
    const seen: string[] = first.body.jobs.map((job: { id: string }) => job.id);
    for (let after = first.body.next as string | null; after !== null;) {
      const page = await http().get(`/jobs?limit=1000&after=${after}`);
      expect(page.status).toBe(200);
      seen.push(...page.body.jobs.map((job: { id: string }) => job.id));
      after = page.body.next;
    }
    expect(seen).toEqual(ids);

    const lean = await http().get('/jobs?limit=1000&lean=true');
    expect(lean.status).toBe(200);
    expect(lean.body.jobs.map((job: { id: string }) => job.id)).toEqual(ids);
    expect(lean.body.next).toBeNull();
    expect(lean.body.jobs[0]).not.toHaveProperty('payload');
    expect(lean.text.length).toBeLessThan(40 * 1024);
    expectError(await http().get('/jobs?lean=yes'), 400, 'invalid_request');
    // The live page reads the lean listing too.
    const ui = await http().get('/ui/state');
    expect(ui.status).toBe(200);
    expect(ui.body.jobs.pending).toHaveLength(20);
    expect(ui.text.length).toBeLessThan(64 * 1024);
  });
});

describe('queue edge: long-poll waiters', () => {
  test('a long-polling claim beyond maxClaimWaiters is 503 too_many_waiters at once', async () => {
    const { http } = await setup({ maxClaimWaiters: 1 });
    const waiting = http()
      .post('/claims')
      .send({ owner: 'w1', waitMs: 2_000 })
      .then((res) => res.status);
    await untilClaimsWait(http);
    const started = Date.now();
    const refused = await http().post('/claims').send({ owner: 'w2', waitMs: 2_000 });
    expectError(refused, 503, 'too_many_waiters');
    expect(refused.body.error).toMatchObject({ maxWaiters: 1 });
    expect(Date.now() - started).toBeLessThan(1_500);
    expect(await waiting).toBe(204);
  });
});
