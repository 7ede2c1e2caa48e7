// The queue against hostile and careless requests, on both dialects: ids that a database would
// store alike or refuse, paths that are not percent-encoding, bodies that are not JSON, too deep,
// or fail to decompress, times that would leave the safe range, browsers' cross-site requests,
// and callers without the API key. Each is a 4xx that changes nothing, never a 500.
import { join } from 'node:path';
import request from 'supertest';
import { afterEach, describe, expect, test } from 'vitest';
import {
  createQueueApp,
  openPostgresQueueStore,
  openSqliteQueueStore,
  QueueClient,
  QueueError,
  startQueue,
  type QueueStore,
} from '../../queue/index.js';
import { MAX_OFFSET_MS } from '../../queue/schemas.js';
import { fakeClock } from '../helpers/clock.js';
import { testSchema } from '../helpers/postgres.js';
import { tempDir } from '../helpers/tmp.js';
import { expectError } from './app-setup.js';

const closers: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

const NOW = 1_700_000_000_000;

const dialects: Record<string, (clock: ReturnType<typeof fakeClock>) => Promise<QueueStore>> = {
  sqlite: (clock) => openSqliteQueueStore({ filename: join(tempDir('leasehold-hardening-'), 'q.sqlite'), clock }),
  postgres: (clock) => openPostgresQueueStore({ connectionString: testSchema('lh_qh').url, clock }),
};

describe.each(Object.keys(dialects))('queue hardening: %s', (dialect) => {
  async function setup() {
    const clock = fakeClock(NOW);
    const store = await dialects[dialect]!(clock);
    closers.push(() => store.close());
    const app = createQueueApp({ store });
    closers.push(() => app.close());
    const http = () => request(app);
    const leased = async (id: string) => {
      expect((await http().post('/jobs').send({ id, qty: 1 })).status).toBe(201);
      const res = await http().post('/claims').send({ owner: 'w1', leaseMs: 60_000 });
      expect(res.status).toBe(200);
      return res.body.lease as { id: string; owner: string; token: number };
    };
    const stats = async () => (await http().get('/stats')).body as Record<string, number>;
    return { http, clock, store, leased, stats };
  }

  test.each([
    ['a lone surrogate (both drivers store it as U+FFFD: two ids would share a row)', 'a\ud800'],
    ['a NUL (PostgreSQL refuses it in text)', 'a\u0000b'],
    ['"." (a URL path collapses it)', '.'],
    ['".." (a URL path collapses it)', '..'],
    ['257 characters', 'x'.repeat(257)],
  ])('an id with %s is 400, and nothing is enqueued', async (_name, id) => {
    const { http, stats } = await setup();
    expectError(await http().post('/jobs').send({ id, qty: 1 }), 400, 'invalid_request', 20);
    expect(await stats()).toEqual({ pending: 0, leased: 0, done: 0, dead: 0 });
  });

  test('an owner with a lone surrogate or a NUL is 400 on every route that takes one', async () => {
    const { http, leased } = await setup();
    const lease = await leased('j1');
    for (const owner of ['w\udfff', 'w\u0000']) {
      expectError(await http().post('/claims').send({ owner }), 400, 'invalid_request', 20);
      for (const op of ['heartbeat', 'finish', 'fail', 'verify', 'release']) {
        const body = op === 'fail' ? { owner, token: lease.token, error: 'x' } : { owner, token: lease.token };
        expectError(await http().post(`/jobs/j1/${op}`).send(body), 400, 'invalid_request', 20);
      }
    }
  });

  test.each([
    ['/jobs/%ZZ', 'not valid percent-encoding'],
    ['/jobs/%ED%A0%80', 'not valid percent-encoding'],
    ['/jobs/%00', 'NUL'],
    ['/jobs/%2E%2E', '"." or ".."'],
    ['/jobs/%2E', '"." or ".."'],
  ])('GET %s is 400 saying why, never 500', async (path, reason) => {
    const { http } = await setup();
    const res = await http().get(path);
    expectError(res, 400, 'invalid_request', 20);
    expect(res.body.error.message).toContain(reason);
  });

  test('a failure message or cancel reason is kept whole, what no store can keep made U+FFFD, the same on both dialects', async () => {
    const { http, leased } = await setup();
    const lease = await leased('j1');
    const failed = await http()
      .post('/jobs/j1/fail')
      .send({ owner: 'w1', token: lease.token, error: 'disk \u0000 said \ud800 \u{1F600}' });
    expect(failed.status, JSON.stringify(failed.body)).toBe(200);
    expect(failed.body.job.lastError).toBe('disk \ufffd said \ufffd \u{1F600}');
    expect((await http().get('/jobs/j1')).body.job.lastError).toBe('disk \ufffd said \ufffd \u{1F600}');
    const cancelled = await http().post('/jobs/j1/cancel').send({ reason: 'stop\u0000now' });
    expect(cancelled.status).toBe(200);
    expect(cancelled.body.job.lastError).toBe('stop\ufffdnow');
  });

  test('JSON nested thousands of levels deep in a payload or a result is 400, and changes nothing', async () => {
    const { http, leased, stats } = await setup();
    const deep = (depth: number) => `${'['.repeat(depth)}1${']'.repeat(depth)}`;
    const enqueue = await http()
      .post('/jobs')
      .set('content-type', 'application/json')
      .send(`{"id":"deep","qty":1,"payload":${deep(5_000)}}`);
    expectError(enqueue, 400, 'invalid_request', 20);
    expect(enqueue.body.error.message).toMatch(/more than 64 levels deep/);
    const lease = await leased('j1');
    const finish = await http()
      .post('/jobs/j1/finish')
      .set('content-type', 'application/json')
      .send(`{"owner":"w1","token":${lease.token},"result":${deep(5_000)}}`);
    expectError(finish, 400, 'invalid_request', 20);
    expect(await stats()).toEqual({ pending: 0, leased: 1, done: 0, dead: 0 });
    // Deep, but within the limit: stored and read back as sent.
    const ok = await http()
      .post('/jobs')
      .set('content-type', 'application/json')
      .send(`{"id":"ok","qty":1,"payload":${deep(60)}}`);
    expect(ok.status).toBe(201);
    expect(JSON.stringify(ok.body.job.payload)).toBe(deep(60));
  });

  test('a deadlineMs or retryInMs that would take a time past 2^53 - 1 is 400; the longest allowed stays safe', async () => {
    const { http, leased } = await setup();
    for (const deadlineMs of [Number.MAX_SAFE_INTEGER, MAX_OFFSET_MS + 1]) {
      expectError(await http().post('/jobs').send({ id: 'far', qty: 1, deadlineMs }), 400, 'invalid_request', 20);
    }
    const longest = await http().post('/jobs').send({ id: 'far', qty: 1, deadlineMs: MAX_OFFSET_MS });
    expect(longest.status).toBe(201);
    expect(longest.body.job.deadline).toBe(NOW + MAX_OFFSET_MS);
    expect(Number.isSafeInteger(longest.body.job.deadline)).toBe(true);

    await http().post('/jobs/far/cancel').send({});
    const lease = await leased('j1');
    const tooLate = await http()
      .post('/jobs/j1/fail')
      .send({ owner: 'w1', token: lease.token, error: 'x', retryInMs: Number.MAX_SAFE_INTEGER });
    expectError(tooLate, 400, 'invalid_request', 20);
    expect((await http().get('/jobs/j1')).body.job.status).toBe('leased');
    const later = await http()
      .post('/jobs/j1/fail')
      .send({ owner: 'w1', token: lease.token, error: 'x', retryInMs: MAX_OFFSET_MS });
    expect(later.body.job.runAt).toBe(NOW + MAX_OFFSET_MS);
  });

  test('a whole number past 2^53 - 1 is refused by the bounds of its field, each said once, not as "not an integer"', async () => {
    const { http, stats } = await setup();
    const cases: Array<[string, object, string]> = [
      ['/jobs', { qty: 2 ** 53 }, 'qty must be at most 9007199254740991'],
      ['/jobs', { qty: -(2 ** 53) }, 'qty must be a positive integer'],
      ['/jobs', { qty: 1, priority: 2 ** 60 }, 'priority must be at most 2147483647'],
      ['/jobs', { qty: 1, deadlineMs: 2 ** 53 }, `deadlineMs must be at most ${MAX_OFFSET_MS} (100 years)`],
      ['/claims', { owner: 'w1', leaseMs: 2 ** 53 }, 'leaseMs must be at most 604800000 (7 days)'],
    ];
    for (const [path, body, issue] of cases) {
      const res = await http().post(path).send(body);
      expect({ status: res.status, message: res.body.error?.message }, JSON.stringify(body)).toEqual({
        status: 400,
        message: `The request body is invalid: ${issue}.`,
      });
    }
    expect(await stats()).toEqual({ pending: 0, leased: 0, done: 0, dead: 0 });
  });

  test("priority is held to PostgreSQL's integer on both databases: its ends are taken and claimed in order, past them is 400", async () => {
    const { http, stats } = await setup();
    for (const priority of [2 ** 31, -(2 ** 31) - 1]) {
      const res = await http().post('/jobs').send({ id: 'far', qty: 1, priority });
      expect({ status: res.status, message: res.body.error?.message }, String(priority)).toEqual({
        status: 400,
        message: `The request body is invalid: priority must be ${priority > 0 ? 'at most 2147483647' : 'at least -2147483648'}.`,
      });
    }
    expect(await stats()).toEqual({ pending: 0, leased: 0, done: 0, dead: 0 });
    for (const [id, priority] of [
      ['low', -(2 ** 31)],
      ['mid', 0],
      ['high', 2 ** 31 - 1],
    ] as const) {
      const res = await http().post('/jobs').send({ id, qty: 1, priority });
      expect({ status: res.status, priority: res.body.job?.priority }, id).toEqual({ status: 201, priority });
    }
    const order: string[] = [];
    for (let i = 0; i < 3; i++) order.push((await http().post('/claims').send({ owner: 'w1' })).body.lease.id);
    expect(order).toEqual(['high', 'mid', 'low']);
  });

  test('ids sent in Latin-1 are refused as not UTF-8: "Müller" and "Möller" are not made one job', async () => {
    const { http, stats } = await setup();
    for (const umlaut of [0xfc, 0xf6]) {
      const latin1 = Buffer.from([...Buffer.from('{"id":"M'), umlaut, ...Buffer.from('ller","qty":1}')]);
      const res = await http()
        .post('/jobs')
        .set('content-type', 'application/json')
        // superagent writes what its serializer returns: the bytes go out as they are.
        .serialize(() => latin1 as unknown as string)
        .send(latin1);
      expectError(res, 400, 'invalid_request', 20);
      expect(res.body.error.message).toBe('The request body is not valid UTF-8; send JSON encoded in UTF-8.');
    }
    expect(await stats()).toEqual({ pending: 0, leased: 0, done: 0, dead: 0 });
  });

  test('a JSON array where an object is expected is said to be an array, as a number or a string is', async () => {
    const { http, stats } = await setup();
    for (const body of [[{ qty: 1 }], []]) {
      const res = await http().post('/jobs').send(body);
      expect({ status: res.status, message: res.body.error?.message }, JSON.stringify(body)).toEqual({
        status: 400,
        message: 'The request body is JSON, but an array rather than an object; send a JSON object.',
      });
    }
    expect(await stats()).toEqual({ pending: 0, leased: 0, done: 0, dead: 0 });
  });

  test('a body that claims gzip but is not gzip is 400, and nothing is enqueued', async () => {
    const { http, stats } = await setup();
    const res = await http()
      .post('/jobs')
      .set('content-type', 'application/json')
      .set('content-encoding', 'gzip')
      .send('{"id":"z","qty":1}');
    expectError(res, 400, 'invalid_request', 20);
    expect(await stats()).toEqual({ pending: 0, leased: 0, done: 0, dead: 0 });
  });

  test('a cross-site "simple" request (text/plain, a form) cannot enqueue or claim: 415, nothing changes', async () => {
    const { http, stats, leased } = await setup();
    await leased('held');
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x']) {
      expectError(
        await http().post('/jobs').set('content-type', type).send('{"qty":1}'),
        415,
        'unsupported_media_type',
        20,
      );
      expectError(
        await http().post('/claims').set('content-type', type).send('{"owner":"evil"}'),
        415,
        'unsupported_media_type',
        20,
      );
    }
    expect(await stats()).toEqual({ pending: 0, leased: 1, done: 0, dead: 0 });
  });
});

describe('queue: the API key', () => {
  const KEY = 'queue-key-0123456789';

  async function service() {
    const queue = await startQueue({ db: join(tempDir('leasehold-apikey-'), 'q.sqlite'), apiKey: KEY });
    closers.push(() => queue.close());
    const client = (apiKey?: string) => {
      const c = new QueueClient(queue.url, { apiKey });
      closers.push(() => c.close());
      return c;
    };
    return { queue, client };
  }

  test('every route but /healthz needs it, the job listing (which shows tokens) included', async () => {
    const { queue, client } = await service();
    const keyed = client(KEY);
    await keyed.enqueue({ id: 'j1', qty: 1 });
    const lease = (await keyed.claim('w1'))!;
    const routes: Array<[string, string, unknown?]> = [
      ['GET', '/jobs?status=leased'],
      ['GET', '/jobs/j1'],
      ['GET', '/stats'],
      ['POST', '/jobs', { qty: 1 }],
      ['POST', '/claims', { owner: 'thief' }],
      ['POST', '/jobs/j1/verify', { owner: 'w1', token: lease.token }],
      ['POST', '/jobs/j1/finish', { owner: 'w1', token: lease.token }],
      ['POST', '/jobs/j1/cancel', {}],
      ['POST', '/verifications', { leases: [{ id: 'j1', owner: 'w1', token: lease.token }] }],
    ];
    for (const [method, path, body] of routes) {
      for (const authorization of [undefined, 'Bearer wrong-key', `Bearer ${KEY.toUpperCase()}`]) {
        const res = await fetch(`${queue.url}${path}`, {
          method,
          headers: {
            ...(body === undefined ? {} : { 'content-type': 'application/json' }),
            ...(authorization === undefined ? {} : { authorization }),
          },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        });
        const answer = (await res.json()) as { error?: { code?: string } };
        expect({ status: res.status, code: answer.error?.code }, `${method} ${path} ${authorization}`).toEqual({
          status: 401,
          code: 'unauthorized',
        });
      }
    }
    expect((await fetch(`${queue.url}/healthz`)).status).toBe(200);
    // Nothing the refused calls asked for happened: the lease is still w1's.
    expect(await keyed.verify('j1', { owner: 'w1', token: lease.token })).toMatchObject({ owner: 'w1' });
  });

  test('QueueClient presents its apiKey; without it every call is QueueError unauthorized', async () => {
    const { client } = await service();
    const refused = await client()
      .stats()
      .catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(QueueError);
    expect(refused).toMatchObject({ code: 'unauthorized', status: 401 });
    expect(await client(KEY).stats()).toEqual({ pending: 0, leased: 0, done: 0, dead: 0 });
    expect(await client().healthy()).toBe(true);
  });
});
