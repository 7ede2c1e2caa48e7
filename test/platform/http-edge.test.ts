// The shared HTTP edge on a bare express app with an error class of its own, and the exchange's
// two helpers for clients: where a request goes, and what an error answer holds.
import express from 'express';
import request from 'supertest';
import { describe, expect, test } from 'vitest';
import { pino } from 'pino';
import { z } from 'zod';
import { errorInBody, urlUnder } from '../../platform/exchange.js';
import {
  edgeFailureOf,
  errorRenderer,
  jsonBody,
  parseWith,
  requestLog,
  unknownRoute,
} from '../../platform/http-edge.js';
import { EDGE_ERROR_STATUS, ServiceError, type EdgeFailure } from '../../platform/service-error.js';

const STATUS = { ...EDGE_ERROR_STATUS, busy: 503 } as const;
type Code = keyof typeof STATUS;

class ToyError extends ServiceError<Code> {
  override readonly name = 'ToyError';
  constructor(code: Code, message: string, details: Record<string, unknown> = {}, options?: ErrorOptions) {
    super(code, STATUS[code], message, details, options);
  }
  static fromEdge(failure: EdgeFailure): ToyError {
    return new ToyError(failure.code, failure.message, failure.details);
  }
}

function toyApp() {
  const lines: Array<Record<string, unknown>> = [];
  const logger = pino(
    { level: 'debug' },
    { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) },
  );
  const app = express();
  app.use(jsonBody());
  app.use(requestLog(logger));
  const body = z.strictObject({ name: z.string({ error: 'name must be a string' }), n: z.int().min(1) });
  app.post('/things', (req, res) => {
    res.status(201).json(parseWith(body, req.body, 'request body', ToyError.fromEdge));
  });
  app.get('/crash', () => {
    throw new Error('boom');
  });
  app.get('/busy', () => {
    throw new ToyError('busy', 'The database stayed locked; retry shortly.', {}, { cause: new Error('SQLITE_BUSY') });
  });
  app.use(unknownRoute(ToyError.fromEdge, 'toy', 'it serves POST /things'));
  app.use(
    errorRenderer((err) => (err instanceof ToyError ? err : ToyError.fromEdge(edgeFailureOf(err, 'toy'))), logger),
  );
  return { http: () => request(app), lines };
}

describe('the HTTP edge', () => {
  test.each([
    ['broken JSON', {}, '{"name":', 400, 'invalid_request'],
    [
      'a charset it cannot read',
      { 'content-type': 'application/json; charset=latin1' },
      '{"name":"a","n":1}',
      415,
      'unsupported_media_type',
    ],
    [
      'a Content-Encoding it cannot read',
      { 'content-encoding': 'compress' },
      '{"name":"a","n":1}',
      415,
      'unsupported_media_type',
    ],
    ['a body over 1 MiB', {}, JSON.stringify({ name: 'x'.repeat(1024 * 1024), n: 1 }), 413, 'payload_too_large'],
  ])('%s is refused in the service error shape', async (_name, headers, body, status, code) => {
    const { http } = toyApp();
    const res = await http().post('/things').set('content-type', 'application/json').set(headers).send(body);
    expect({ status: res.status, code: res.body.error?.code }).toEqual({ status, code });
    expect(res.body.error.message).toMatch(/\w{5,}/);
  });

  test('zod issues are one 400 naming every issue, each led by its path unless its message already is', async () => {
    const { http } = toyApp();
    const res = await http().post('/things').send({ name: 3, n: 0, extra: true });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('invalid_request');
    expect(res.body.error.message).toMatch(/^The request body is invalid: /);
    expect(res.body.error.message).toContain('name must be a string');
    expect(res.body.error.message).toContain('n: ');
    expect(res.body.error.issues.map((i: { path: string }) => i.path)).toEqual(['name', 'n', '']);
    expect((await http().post('/things').send({ name: 'a', n: 2 })).status).toBe(201);
  });

  test('an absent body is read as {}, so the schema names the missing fields', async () => {
    const { http } = toyApp();
    const res = await http().post('/things');
    expect(res.body.error.issues.map((i: { path: string }) => i.path)).toEqual(['name', 'n']);
  });

  test('an unknown route is 404 not_found saying what the service serves', async () => {
    const { http } = toyApp();
    const res = await http().put('/things');
    expect({ status: res.status, code: res.body.error.code }).toEqual({ status: 404, code: 'not_found' });
    expect(res.body.error.message).toBe('There is no PUT /things on the toy; it serves POST /things.');
  });

  test("the unexpected is a logged 500 internal; a 5xx with a cause is logged; refusals are the request log's", async () => {
    const { http, lines } = toyApp();
    const crash = await http().get('/crash');
    expect({ status: crash.status, body: crash.body }).toEqual({
      status: 500,
      body: {
        error: {
          code: 'internal',
          message: 'The toy failed unexpectedly; the error is in its log. Retry the request.',
        },
      },
    });
    expect((await http().get('/busy')).status).toBe(503);
    await http().get('/nope');
    await http().post('/things').send({ name: 'a', n: 1 });
    expect(lines.map((l) => [l.level, l.msg, l.code ?? null])).toEqual([
      [50, 'unexpected error', 'internal'],
      [40, 'request failed', 'internal'],
      [50, 'The database stayed locked; retry shortly.', 'busy'],
      [40, 'request failed', 'busy'],
      [30, 'request refused', 'not_found'],
      [20, 'request', null],
    ]);
    expect((lines[0]?.err as { message?: string }).message).toBe('boom');
  });
});

describe('the exchange helpers', () => {
  test('urlUnder keeps the base path, encodes each segment whole, and sets the query', () => {
    const cases: Array<[string, string[], string]> = [
      ['http://h:1', ['jobs'], 'http://h:1/jobs'],
      ['http://h:1/', ['jobs', 'a b/c?d#e', 'finish'], 'http://h:1/jobs/a%20b%2Fc%3Fd%23e/finish'],
      ['http://h:1/prefix', ['send'], 'http://h:1/prefix/send'],
      ['http://h:1/prefix/?x=1#frag', ['effects'], 'http://h:1/prefix/effects'],
    ];
    for (const [base, segments, expected] of cases) expect(urlUnder(new URL(base), segments).href, base).toBe(expected);
    expect(
      urlUnder(new URL('http://h:1/p/'), ['jobs'], new URLSearchParams({ status: 'pending', limit: '2' })).href,
    ).toBe('http://h:1/p/jobs?status=pending&limit=2');
  });

  test('errorInBody splits the error object, and is undefined for anything else', () => {
    expect(errorInBody({ error: { code: 'fenced', message: 'm', token: 3 } })).toEqual({
      code: 'fenced',
      message: 'm',
      details: { token: 3 },
    });
    expect(errorInBody({ error: { code: 'x' } })).toEqual({ code: 'x', message: undefined, details: {} });
    for (const body of [
      undefined,
      null,
      'Bad Gateway',
      { error: 'x' },
      { error: { message: 'no code' } },
      { error: [1] },
    ]) {
      expect(errorInBody(body), JSON.stringify(body)).toBeUndefined();
    }
  });
});
