// GET /openapi.json on the receiver: the routes it serves (the admin routes only in test mode),
// and POST /effects' body and Fencing-Token header, in its single and its batch form (`?batch`),
// refusing and accepting what the route does, and its answers in the documented shapes.
import request from 'supertest';
import { expect, test } from 'vitest';
import { z } from 'zod';
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

type JsonSchema = { type?: string; properties?: Record<string, unknown>; anyOf?: JsonSchema[] };

/**
 * POST /effects' documented body forms, each as a validator: the single effect's and the
 * batch's (the form whose object has `effects`). OpenAPI has one body per operation, so the
 * forms are the object alternatives of its `anyOf`; a body with none is the single form alone.
 */
function documentedForms(document: OpenApiDocument): { single?: z.ZodType; batch?: z.ZodType } {
  const operation = document.paths['/effects']?.post as
    { requestBody: { content: { 'application/json': { schema: JsonSchema } } } } | undefined;
  const schema = operation!.requestBody.content['application/json'].schema;
  const objects = (schema.anyOf ?? []).filter((form) => form.type === 'object');
  const forms = objects.length > 0 ? objects : [schema];
  // Each form through the shared helper, as the only body of an operation of its own.
  const validator = (form: JsonSchema | undefined) =>
    form &&
    documentedBody(
      { paths: { '/form': { post: { requestBody: { content: { 'application/json': { schema: form } } } } } } } as never,
      'post',
      '/form',
    );
  const batch = forms.find((form) => form.properties?.effects !== undefined);
  return { single: validator(forms.find((form) => form !== batch)), batch: validator(batch) };
}

/** The documented JSON schema of one answer (a status, or the error component), refs resolved, as a validator. */
function documentedAnswer(document: OpenApiDocument, status: number): z.ZodType {
  const responses = (
    document.paths['/effects']!.post as {
      responses: Record<string, { content?: { 'application/json'?: { schema: object } } }>;
    }
  ).responses;
  const schema = responses[String(status)]?.content?.['application/json']?.schema;
  if (!schema) throw new Error(`the document has no JSON answer ${status} for POST /effects`);
  const resolve = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(resolve);
    if (node === null || typeof node !== 'object') return node;
    const ref = (node as { $ref?: unknown }).$ref;
    if (typeof ref === 'string') return resolve(document.components.schemas[ref.split('/').pop()!]);
    return Object.fromEntries(Object.entries(node).map(([key, value]) => [key, resolve(value)]));
  };
  return z.fromJSONSchema(resolve(schema) as Parameters<typeof z.fromJSONSchema>[0]);
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
  const body = documentedForms(document).single!;
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
    // A batch's body without `?batch` in the query is no single effect.
    { token: '7', body: { effects: [{ jobId: 'h', qty: 1, token: 7 }] } },
  ];
  for (const sample of samples) {
    const res = await request(app)
      .post('/effects')
      .set('Fencing-Token', sample.token)
      .type('json')
      .send(JSON.stringify(sample.body));
    const refused = !header.safeParse(sample.token).success || !body.safeParse(sample.body).success;
    expect({ ...sample, refused }).toEqual({ ...sample, refused: res.status === 400 });
    const answer = documentedAnswer(document, res.status).safeParse(res.body);
    expect({ ...sample, answer: answer.error?.message }).toEqual({ ...sample, answer: undefined });
  }
});

test('POST /effects documents its batch form: the `batch` query parameter, the headers, the body and the answers', async () => {
  const { document } = await setup(false);
  const operation = document.paths['/effects']!.post as {
    description: string;
    parameters: Array<{ name: string; in: string; required: boolean; description?: string }>;
    responses: Record<string, unknown>;
  };
  const parameter = (name: string) => operation.parameters.find((p) => p.name === name);
  expect(parameter('batch')).toMatchObject({ in: 'query', required: false });
  expect(documentedParameter(document, 'post', '/effects', 'batch').safeParse('').success).toBe(true);
  // A batch carries each effect's token in its body, so the header cannot be required of every request.
  expect(parameter('Fencing-Token')).toMatchObject({ in: 'header', required: false });
  expect(parameter('Leasehold-Signature')?.description).toContain('"<t>.batch.POST <path>.<body>"');
  expect(documentedForms(document).batch).toBeDefined();
  const results = (document.components.schemas.BatchResult ?? {}) as { anyOf?: unknown[] };
  expect(results.anyOf).toHaveLength(3);
  // A result's status and body go together: 201 with applied, 200 with duplicate, an error status with an error.
  const effect = { jobId: 'a', qty: 1, token: 1, appliedAt: 1 };
  const answer = documentedAnswer(document, 200);
  expect(answer.safeParse({ results: [{ status: 201, body: { outcome: 'applied', effect } }] }).success).toBe(true);
  expect(answer.safeParse({ results: [{ status: 201, body: { outcome: 'duplicate', effect } }] }).success).toBe(false);
  expect(answer.safeParse({ results: [{ status: 409, body: { outcome: 'applied', effect } }] }).success).toBe(false);
  // Refused as a whole: no batch at all, a bad signature, too big, not JSON, a busy database.
  expect(Object.keys(operation.responses)).toEqual(
    expect.arrayContaining(['200', '201', '400', '401', '413', '415', '503']),
  );
  expect(operation.description).toMatch(/`\?batch`/);
});

test("POST /effects?batch's documented body accepts and refuses what the route does, and its answers are as documented", async () => {
  const { app, document } = await setup(false);
  const batch = documentedForms(document).batch;
  if (!batch) throw new Error('the document describes no batch form of POST /effects');
  const samples: unknown[] = [
    { effects: [{ jobId: 'a', qty: 1, token: 1 }] },
    {
      effects: [
        { jobId: 'a', qty: 1, token: 2 },
        { jobId: 'b', key: 'mail', body: { to: ['ann'] }, token: 1 },
      ],
    },
    // Judged, not refused: a fenced token and a conflicting qty are results, as each alone would be.
    {
      effects: [
        { jobId: 'a', qty: 1, token: 1 },
        { jobId: 'a', qty: 2, token: 2 },
      ],
    },
    // One bad effect refuses only itself; the document refuses the batch that holds it.
    {
      effects: [
        { jobId: 'c', qty: 1, token: 1 },
        { jobId: 'c', qty: 1 },
      ],
    },
    { effects: [{ jobId: 'd', qty: 1, token: 0 }] },
    { effects: [{ jobId: 'd', qty: 1, token: 1.5 }] },
    { effects: [{ jobId: 'd', token: 1 }] },
    { effects: [{ jobId: 'd', qty: 1, token: 1, extra: true }] },
    { effects: [{ jobId: '', qty: 1, token: 1 }] },
    { effects: ['x'] },
    // No batch at all: refused as a whole.
    { effects: [] },
    { effects: Array.from({ length: 101 }, (_, i) => ({ jobId: `e${i}`, qty: 1, token: 1 })) },
    { effects: [{ jobId: 'f', qty: 1, token: 1 }], extra: 1 },
    { effects: { jobId: 'f', qty: 1, token: 1 } },
    { jobId: 'f', qty: 1 },
    {},
  ];
  const statuses: number[] = [];
  for (const sample of samples) {
    const res = await request(app).post('/effects?batch').type('json').send(JSON.stringify(sample));
    const results = (res.body as { results?: Array<{ status: number }> }).results ?? [];
    const routeRefused = res.status === 400 || results.some((result) => result.status === 400);
    expect({ sample, refused: !batch.safeParse(sample).success }).toEqual({ sample, refused: routeRefused });
    const answer = documentedAnswer(document, res.status).safeParse(res.body);
    expect({ sample, answer: answer.error?.message }).toEqual({ sample, answer: undefined });
    statuses.push(res.status, ...results.map((result) => result.status));
  }
  // Every kind of result was met, each in its documented shape.
  expect([...new Set(statuses)].sort((a, b) => a - b)).toEqual([200, 201, 400, 409, 422]);
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
