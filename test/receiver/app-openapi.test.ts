// GET /openapi.json on the receiver: the routes it serves (the admin routes only in test mode),
// and POST /effects' body and Fencing-Token header refusing and accepting what the route does.
import request from 'supertest';
import { expect, test } from 'vitest';
import type { OpenApiDocument } from '../../platform/openapi.js';
import { createReceiverApp, FaultController } from '../../receiver/index.js';
import { documentedBody, documentedParameter, documentedRoutes, servedRoutes } from '../helpers/openapi.js';
import { sqliteStore } from './setup.js';

async function setup(testMode: boolean) {
  const { store } = await sqliteStore();
  const app = createReceiverApp({ store, ...(testMode ? { faults: new FaultController() } : {}) });
  const document = (await request(app).get('/openapi.json').expect(200)).body as OpenApiDocument;
  return { app, document };
}

test('the document lists exactly the routes the app serves, with or without test mode', async () => {
  for (const testMode of [false, true]) {
    const { app, document } = await setup(testMode);
    expect(documentedRoutes(document)).toEqual(servedRoutes(app));
    expect(documentedRoutes(document).includes('POST /admin/reset')).toBe(testMode);
  }
});

test("POST /effects' documented body and header accept and refuse what the route does", async () => {
  const { app, document } = await setup(false);
  const body = documentedBody(document, 'post', '/effects');
  const header = documentedParameter(document, 'post', '/effects', 'Fencing-Token');
  const samples: Array<{ token: string; body: unknown }> = [
    { token: '1', body: { jobId: 'a', qty: 3 } },
    { token: '2', body: { jobId: 'b', qty: 0 } },
    { token: '2', body: { jobId: 'b', qty: 1.5 } },
    { token: '2', body: { jobId: '', qty: 1 } },
    { token: '2', body: { jobId: 'b', qty: 1, extra: true } },
    { token: '0', body: { jobId: 'c', qty: 1 } },
    { token: 'abc', body: { jobId: 'c', qty: 1 } },
    { token: '1e3', body: { jobId: 'c', qty: 1 } },
    { token: '99999999999999999', body: { jobId: 'c', qty: 1 } },
    { token: '7', body: { jobId: 'd', qty: 2 } },
    { token: '7', body: { jobId: 'e', key: 'mail', body: { to: ['ann'] } } },
    { token: '7', body: { jobId: 'e', key: 'charge', qty: 3, body: null } },
    { token: '7', body: { jobId: 'f', key: '', qty: 1 } },
    { token: '7', body: { jobId: 'f', key: 'k'.repeat(129), qty: 1 } },
    { token: '7', body: { jobId: 'f', key: 7, qty: 1 } },
    { token: '7', body: { jobId: 'g' } },
    { token: '7', body: { jobId: 'g', key: 'k' } },
  ];
  for (const sample of samples) {
    const res = await request(app)
      .post('/effects')
      .set('Fencing-Token', sample.token)
      .type('json')
      .send(JSON.stringify(sample.body));
    const refused = !header.safeParse(sample.token).success || !body.safeParse(sample.body).success;
    expect({ ...sample, refused }).toEqual({ ...sample, refused: res.status === 400 });
  }
});

test("the listings' documented query parameters accept and refuse what the routes do", async () => {
  const { app, document } = await setup(false);
  const limit = documentedParameter(document, 'get', '/effects', 'limit');
  const after = documentedParameter(document, 'get', '/journal', 'after');
  for (const [value, refused] of [
    ['1000', false],
    ['1001', true],
    ['0', true],
  ] as const) {
    expect(!limit.safeParse(Number(value)).success).toBe(refused);
    expect((await request(app).get(`/effects?limit=${value}`)).status === 400).toBe(refused);
  }
  expect([after.safeParse(0).success, after.safeParse(-1).success]).toEqual([true, false]);
  expect((await request(app).get('/journal?after=-1')).status).toBe(400);
});
