// GET /openapi.json on the gateway: the routes it serves, and POST /send's schema refusing and
// accepting what the route does.
import request from 'supertest';
import { afterEach, expect, test } from 'vitest';
import { createGatewayApp } from '../../gateway/app.js';
import type { OpenApiDocument } from '../../platform/openapi.js';
import { documentedBody, documentedRoutes, servedRoutes } from '../helpers/openapi.js';

const closers: Array<() => void> = [];
afterEach(() => {
  for (const close of closers.splice(0)) close();
});

async function setup() {
  // Nothing listens at either URL: every valid send ends 503 queue_unavailable, never 400.
  const app = createGatewayApp({ queueUrl: 'http://127.0.0.1:1', receiverUrl: 'http://127.0.0.1:1' });
  closers.push(() => app.close());
  const document = (await request(app).get('/openapi.json').expect(200)).body as OpenApiDocument;
  return { app, document };
}

test('the document lists exactly the routes the app serves', async () => {
  const { app, document } = await setup();
  expect(documentedRoutes(document)).toEqual(servedRoutes(app));
  expect(documentedRoutes(document)).toContain('POST /send');
});

test("POST /send's documented schema accepts and refuses what the route does", async () => {
  const { app, document } = await setup();
  const schema = documentedBody(document, 'post', '/send');
  const bodies = [
    { jobId: 'a', owner: 'w1', token: 1, qty: 3 },
    { jobId: 'a', owner: 'w1', token: 0, qty: 3 },
    { jobId: '', owner: 'w1', token: 1, qty: 3 },
    { jobId: 'a', owner: 'w1', token: 1 },
    { jobId: 'a', owner: 'w1', token: 1, qty: 3, tokn: 1 },
    { jobId: 'a', owner: 'w1', token: 2 ** 53, qty: 3 },
    { jobId: 'a', owner: 'w1', token: 1, key: 'email', body: { to: 'x@example.com' } },
    { jobId: 'a', owner: 'w1', token: 1, to: 'receiver', key: 'charge', qty: 2, body: [1, 'two', null] },
    { jobId: 'a', owner: 'w1', token: 1, key: '', qty: 1 },
    { jobId: 'a', owner: 'w1', token: 1, key: 'k'.repeat(129), qty: 1 },
    { jobId: 'a', owner: 'w1', token: 1, key: 7, qty: 1 },
    { jobId: 'a', owner: 'w1', token: 1, to: '', qty: 1 },
  ];
  for (const body of bodies) {
    const res = await request(app).post('/send').send(body);
    expect({ body, refused: !schema.safeParse(body).success }).toEqual({ body, refused: res.status === 400 });
  }
  const send = document.paths['/send']!.post as { responses: Record<string, { description: string }> };
  expect(Object.keys(send.responses)).toEqual(
    expect.arrayContaining(['200', '400', '404', '409', '422', '502', '503']),
  );
});

test("POST /sends's documented schema accepts and refuses what the route does", async () => {
  const { app, document } = await setup();
  const schema = documentedBody(document, 'post', '/sends');
  const send = { jobId: 'a', owner: 'w1', token: 1, qty: 3 };
  const bodies = [
    { sends: [send] },
    { sends: [send, { ...send, key: 'email', body: { to: 'x@example.com' } }] },
    { sends: [] },
    { sends: [send, { ...send, token: 0 }] },
    { sends: [{ jobId: 'a', owner: 'w1', token: 1 }] },
    { sends: [send], extra: 1 },
    { sends: send },
    {},
  ];
  for (const body of bodies) {
    const res = await request(app).post('/sends').send(body);
    // Refused or not, as the document says: a send the route accepts is judged (here, an unknown job).
    expect({ body, refused: !schema.safeParse(body).success }).toEqual({ body, refused: res.status === 400 });
  }
});
