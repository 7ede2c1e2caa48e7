// GET /openapi.json on the queue: every route the app serves is in the document and nothing
// else is, and the document's request schemas accept and refuse what the routes do.
import { join } from 'node:path';
import request from 'supertest';
import { afterEach, expect, test } from 'vitest';
import type { OpenApiDocument } from '../../platform/openapi.js';
import { createQueueApp, openSqliteQueueStore, type QueueApp } from '../../queue/index.js';
import { documentedBody, documentedParameter, documentedRoutes, servedRoutes } from '../helpers/openapi.js';
import { tempDir } from '../helpers/tmp.js';

const closers: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

async function setup(options: { apiKey?: string } = {}) {
  const store = await openSqliteQueueStore({ filename: join(tempDir('leasehold-openapi-'), 'q.sqlite') });
  closers.push(() => store.close());
  const app: QueueApp = createQueueApp({ store, ...options });
  closers.push(() => app.close());
  const auth = options.apiKey ? { Authorization: `Bearer ${options.apiKey}` } : {};
  const res = await request(app).get('/openapi.json').set(auth);
  expect(res.status).toBe(200);
  return { app, auth, document: res.body as OpenApiDocument };
}

test('the document lists exactly the routes the app serves', async () => {
  const { app, document } = await setup();
  expect(document.openapi).toBe('3.1.0');
  expect(documentedRoutes(document)).toEqual(servedRoutes(app));
  expect(documentedRoutes(document)).toEqual(
    expect.arrayContaining(['POST /jobs/{id}/finish', 'GET /metrics', 'GET /openapi.json', 'GET /healthz']),
  );
});

test("the document's request schemas accept and refuse what the routes do", async () => {
  const { app, document } = await setup();
  const samples: Array<{ method: 'post'; path: string; url: string; body: unknown }> = [
    { method: 'post', path: '/jobs', url: '/jobs', body: { id: 'a', qty: 2, payload: { deep: [1, { x: null }] } } },
    { method: 'post', path: '/jobs', url: '/jobs', body: { qty: 0 } },
    { method: 'post', path: '/jobs', url: '/jobs', body: { qty: 1, leaseMS: 5 } },
    { method: 'post', path: '/jobs', url: '/jobs', body: { qty: 1.5 } },
    { method: 'post', path: '/claims', url: '/claims', body: { owner: 'w1', max: 3, waitMs: 0 } },
    { method: 'post', path: '/claims', url: '/claims', body: { owner: 'w1', max: 101 } },
    { method: 'post', path: '/claims', url: '/claims', body: { owner: '' } },
    {
      method: 'post',
      path: '/jobs/{id}/finish',
      url: '/jobs/a/finish',
      body: { owner: 'w1', token: 1, next: { leaseMs: 10 } },
    },
    { method: 'post', path: '/jobs/{id}/finish', url: '/jobs/a/finish', body: { owner: 'w1', token: 0 } },
    { method: 'post', path: '/jobs/{id}/finish', url: '/jobs/a/finish', body: { owner: 'w1', token: 1, next: 'yes' } },
    { method: 'post', path: '/finishes', url: '/finishes', body: { owner: 'w1', finishes: [] } },
    {
      method: 'post',
      path: '/finishes',
      url: '/finishes',
      body: { owner: 'w1', finishes: [{ id: 'a', token: 1, result: { ok: true } }], next: { leaseMs: 10 } },
    },
    { method: 'post', path: '/finishes', url: '/finishes', body: { owner: 'w1', finishes: [{ id: 'a', token: 0 }] } },
    {
      method: 'post',
      path: '/finishes',
      url: '/finishes',
      body: { owner: 'w1', finishes: Array.from({ length: 101 }, (_, i) => ({ id: `j${i}`, token: 1 })) },
    },
    { method: 'post', path: '/verifications', url: '/verifications', body: { leases: [] } },
    {
      method: 'post',
      path: '/verifications',
      url: '/verifications',
      body: { leases: [{ id: 'a', owner: 'w', token: 1 }] },
    },
  ];
  for (const sample of samples) {
    const res = await request(app)
      .post(sample.url)
      .send(sample.body as object);
    const refusedByRoute = res.status === 400;
    const refusedByDocument = !documentedBody(document, sample.method, sample.path).safeParse(sample.body).success;
    expect({ ...sample, refusedByDocument }).toEqual({ ...sample, refusedByDocument: refusedByRoute });
  }
  // Query parameters: the schema says what the text must come to.
  const limit = documentedParameter(document, 'get', '/jobs', 'limit');
  expect([limit.safeParse(1000).success, limit.safeParse(1001).success, limit.safeParse(0).success]).toEqual([
    true,
    false,
    false,
  ]);
  expect((await request(app).get('/jobs?limit=1001')).status).toBe(400);
  expect((await request(app).get('/jobs?limit=1000')).status).toBe(200);
});

test('every answer a route documents has a body shape; errors point to the one error body', async () => {
  const { document } = await setup();
  const finish = document.paths['/jobs/{id}/finish']!.post as { responses: Record<string, { description: string }> };
  expect(Object.keys(finish.responses)).toEqual(expect.arrayContaining(['200', '400', '404', '409', '500', '503']));
  expect(finish.responses['409']!.description).toContain('stale_lease');
  expect(document.components.schemas).toHaveProperty('Job');
  expect(document.components.schemas).toHaveProperty('Lease');
  expect(document.components.schemas.Error).toMatchObject({ required: ['error'] });
});

test('with an API key the document says so, and /healthz stays open', async () => {
  const { app, auth, document } = await setup({ apiKey: 'k3y' });
  expect(document.security).toEqual([{ bearer: [] }]);
  expect((document.paths['/healthz']!.get as { security?: unknown }).security).toEqual([]);
  expect((document.paths['/jobs']!.post as { responses: Record<string, unknown> }).responses).toHaveProperty('401');
  expect((await request(app).get('/openapi.json')).status).toBe(401);
  expect((await request(app).get('/openapi.json').set(auth)).status).toBe(200);
});
