// The shared HTTP edge on a bare express app with an error class of its own, and the exchange's
// two helpers for clients: where a request goes, and what an error answer holds.
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import express from 'express';
import request from 'supertest';
import { describe, expect, test } from 'vitest';
import { pino } from 'pino';
import { z } from 'zod';
import { ANSWER_TOO_LARGE, errorInBody, exchange, keepAliveAgent, urlUnder } from '../../platform/exchange.js';
import {
  edgeFailureOf,
  errorRenderer,
  hasProtoKey,
  jsonBody,
  jsonDeeperThan,
  jsonKeyCount,
  MAX_JSON_DEPTH,
  parseWith,
  requestLog,
  requireApiKey,
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

function toyApp(apiKey?: string) {
  const lines: Array<Record<string, unknown>> = [];
  const logger = pino(
    { level: 'debug' },
    { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) },
  );
  const app = express();
  app.use(requireApiKey(apiKey, ToyError.fromEdge, 'toy'));
  app.use(jsonBody());
  app.get('/healthz', (_req, res) => {
    res.json({ ok: true });
  });
  app.get('/things/:id', (req, res) => {
    res.json({ id: req.params.id });
  });
  app.post('/anything', (req, res) => {
    res.json({ body: req.body as unknown });
  });
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
  return { app, http: () => request(app), lines };
}

/**
 * One request through a real socket, body bytes exactly as given (supertest would re-encode a
 * binary body); the app listens only for it.
 */
async function raw(
  app: express.Express,
  init: { method?: string; path: string; headers?: Record<string, string>; body?: Buffer | string },
): Promise<{ status: number; body: { error?: { code: string; message: string } } & Record<string, unknown> }> {
  const server = app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  try {
    const { port } = server.address() as AddressInfo;
    const res = await fetch(`http://127.0.0.1:${port}${init.path}`, {
      method: init.method ?? 'POST',
      headers: init.headers ?? {},
      ...(init.body === undefined ? {} : { body: init.body }),
    });
    return { status: res.status, body: (await res.json()) as { error?: { code: string; message: string } } };
  } finally {
    server.close();
  }
}

/** JSON nested `depth` levels deep: `[[...[1]...]]`. */
function nested(depth: number): string {
  return `${'['.repeat(depth)}1${']'.repeat(depth)}`;
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

  test('an empty JSON body: the schema names the missing fields, each as missing rather than of the wrong kind', async () => {
    const { http } = toyApp();
    const res = await http().post('/things').send({});
    expect(res.body.error.issues).toEqual([
      { path: 'name', message: 'name is required' },
      { path: 'n', message: 'n is required' },
    ]);
    expect(res.body.error.message).toBe('The request body is invalid: name is required; n is required.');
    // Given but of the wrong kind (null included), a field keeps its schema's own message.
    const wrong = await http().post('/things').send({ name: null, n: 'x' });
    expect(wrong.body.error.issues.map((i: { message: string }) => i.message)).toEqual([
      'name must be a string',
      expect.not.stringContaining('required'),
    ]);
  });

  test('an unknown route is 404 not_found saying what the service serves', async () => {
    const { http } = toyApp();
    const res = await http().put('/things').send({});
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

describe('the HTTP edge against hostile and careless input', () => {
  test.each([
    ['text/plain (a cross-site "simple" request)', 'text/plain', '{"name":"a","n":1}'],
    ['text/plain with a charset', 'text/plain;charset=UTF-8', '{"name":"a","n":1}'],
    ['a form', 'application/x-www-form-urlencoded', 'name=a&n=1'],
    ['multipart', 'multipart/form-data; boundary=x', '--x--'],
    ['a type that merely contains json', 'application/jsonp', '{"name":"a","n":1}'],
  ])('a body sent as %s is 415, and the route never runs', async (_name, type, body) => {
    const { http } = toyApp();
    const res = await http().post('/things').set('content-type', type).send(body);
    expect({ status: res.status, code: res.body.error?.code }).toEqual({ status: 415, code: 'unsupported_media_type' });
    expect(res.body.error.message).toMatch(/must be JSON, declared as "Content-Type: application\/json"/);
  });

  test('a body without any Content-Type is 415; an empty form post too', async () => {
    const { app } = toyApp();
    // A Buffer, since fetch would declare a string text/plain.
    const bare = await raw(app, { path: '/things', body: Buffer.from('{"name":"a","n":1}') });
    expect({ status: bare.status, code: bare.body.error?.code }).toEqual({
      status: 415,
      code: 'unsupported_media_type',
    });
    expect(bare.body.error?.message).toMatch(/this request has no Content-Type/);
    const form = await raw(app, {
      path: '/anything',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(form.status).toBe(415);
  });

  test('application/json and any +json type are read; a bodiless POST, which declares no type, is 415', async () => {
    const { http } = toyApp();
    for (const type of ['application/json', 'Application/JSON; charset=utf-8', 'application/merge-patch+json']) {
      expect((await http().post('/things').set('content-type', type).send('{"name":"a","n":1}')).status, type).toBe(
        201,
      );
    }
    // A browser page can send a bodiless POST cross-site without a preflight; a JSON one, not.
    const bodiless = await http().post('/anything');
    expect({ status: bodiless.status, code: bodiless.body.error?.code }).toEqual({
      status: 415,
      code: 'unsupported_media_type',
    });
    const read = await http().get('/healthz');
    expect(read.status, 'a GET needs no type').not.toBe(415);
  });

  test.each([
    ['gzip that is not gzip', 'gzip', Buffer.from('{"name":"a","n":1}')],
    ['gzip cut short', 'gzip', gzipSync('{"name":"a","n":1}').subarray(0, 12)],
    ['deflate that is not deflate', 'deflate', Buffer.from('nope')],
    ['br that is not br', 'br', Buffer.from('nope nope nope')],
  ])('%s is 400 invalid_request, never 500', async (_name, encoding, body) => {
    const { app, lines } = toyApp();
    const res = await raw(app, {
      path: '/things',
      headers: { 'content-type': 'application/json', 'content-encoding': encoding },
      body,
    });
    expect({ status: res.status, code: res.body.error?.code }).toEqual({ status: 400, code: 'invalid_request' });
    expect(res.body.error?.message).toMatch(/could not be decompressed as its Content-Encoding says/);
    expect(lines.filter((line) => line.msg === 'unexpected error')).toEqual([]);
  });

  test('a gzip body that is gzip is read', async () => {
    const { app } = toyApp();
    const res = await raw(app, {
      path: '/things',
      headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
      body: gzipSync('{"name":"a","n":1}'),
    });
    expect(res.status).toBe(201);
  });

  test(`JSON deeper than ${MAX_JSON_DEPTH} levels is 400 before any schema recurses into it; ${MAX_JSON_DEPTH} is fine`, async () => {
    const { http } = toyApp();
    const post = (text: string) => http().post('/anything').set('content-type', 'application/json').send(text);
    expect((await post(nested(MAX_JSON_DEPTH))).status).toBe(200);
    for (const depth of [MAX_JSON_DEPTH + 1, 5_000, 100_000]) {
      const res = await post(`{"payload":${nested(depth)}}`);
      expect({ status: res.status, code: res.body.error?.code }, String(depth)).toEqual({
        status: 400,
        code: 'invalid_request',
      });
      expect(res.body.error.message).toMatch(/more than 64 levels deep/);
    }
  });

  test('jsonKeyCount counts the colons outside strings, escapes included; hasProtoKey finds __proto__ at any depth', () => {
    const count = (text: string) => jsonKeyCount(Buffer.from(text));
    expect(count('{}')).toBe(0);
    expect(count('{"a":1,"b":{"c":[{"d":2}]}}')).toBe(4);
    expect(count('["a:b", "c\\":d", "\\\\", {"e:":":"}]')).toBe(1);
    expect(count('{"κλειδί":"τιμή:"}')).toBe(1);
    expect(hasProtoKey(JSON.parse('{"a":[1,{"__proto__":2}]}'))).toBe(true);
    expect(hasProtoKey(JSON.parse('{"a":["__proto__"],"__proto_":1}'))).toBe(false);
  });

  test('jsonDeeperThan walks any depth without recursing', () => {
    expect(jsonDeeperThan(JSON.parse(nested(3)), 3)).toBe(false);
    expect(jsonDeeperThan(JSON.parse(nested(4)), 3)).toBe(true);
    expect(jsonDeeperThan({ a: [{ b: {} }] }, 4)).toBe(false);
    expect(jsonDeeperThan({ a: [{ b: {} }] }, 3)).toBe(true);
    expect(jsonDeeperThan('text', 0)).toBe(false);
    expect(jsonDeeperThan(JSON.parse(nested(1_000_000)), 64)).toBe(true);
  });

  test.each(['/things/%ZZ', '/things/%E0%A4%A', '/things/%ED%A0%80'])(
    'a path that is not valid percent-encoding (%s) is 400, never 500',
    async (path) => {
      const { http } = toyApp();
      const res = await http().get(path);
      expect({ status: res.status, code: res.body.error?.code }).toEqual({ status: 400, code: 'invalid_request' });
      expect(res.body.error.message).toMatch(/not valid percent-encoding/);
    },
  );
});

describe('the API key', () => {
  const KEY = 'k3y-0123456789abcdef';

  test('every route but /healthz needs "Authorization: Bearer <key>": 401 unauthorized otherwise', async () => {
    const { http } = toyApp(KEY);
    expect((await http().get('/healthz')).status).toBe(200);
    for (const [name, authorization] of [
      ['none', undefined],
      ['another key of the same length', `Bearer ${'x'.repeat(KEY.length)}`],
      ['a prefix of the key', `Bearer ${KEY.slice(0, -1)}`],
      ['the key and more', `Bearer ${KEY}x`],
      ['the key without the scheme', KEY],
      ['another scheme', `Basic ${KEY}`],
    ] as const) {
      const req = http().post('/things').send({ name: 'a', n: 1 });
      if (authorization !== undefined) req.set('authorization', authorization);
      const res = await req;
      expect({ status: res.status, code: res.body.error?.code }, name).toEqual({ status: 401, code: 'unauthorized' });
      expect(res.headers['www-authenticate'], name).toBe('Bearer');
      expect(res.body.error.message, name).toMatch(/--api-key or LEASEHOLD_API_KEY/);
    }
    expect((await http().get('/things/1')).status).toBe(401);
    expect((await http().get('/nope')).status).toBe(401);
    const ok = await http().post('/things').set('authorization', `bearer ${KEY}`).send({ name: 'a', n: 1 });
    expect(ok.status).toBe(201);
  });

  test('the key is checked before the body is read: a caller without it gets 401, not a parse error', async () => {
    const { http } = toyApp(KEY);
    const res = await http().post('/things').set('content-type', 'text/plain').send('{"name":');
    expect(res.status).toBe(401);
  });

  test('a key that cannot travel in a header is refused when the service is built', () => {
    expect(() => requireApiKey('', ToyError.fromEdge, 'toy')).toThrow(/must not be empty/);
    expect(() => requireApiKey('two words', ToyError.fromEdge, 'toy')).toThrow(/printable ASCII without spaces/);
  });
});

describe('the exchange against a peer that answers too much', () => {
  test('an answer over maxAnswerBytes fails the exchange as ERR_ANSWER_TOO_LARGE, declared or not', async () => {
    const big = Buffer.alloc(64 * 1024, 'x');
    const server = createServer((req, res) => {
      if (req.url === '/declared') res.setHeader('content-length', big.length);
      res.end(big);
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const agent = keepAliveAgent();
    try {
      const base = new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
      for (const path of ['/declared', '/chunked']) {
        const url = urlUnder(base, [path.slice(1)]);
        const cut = await exchange({ method: 'GET', url, timeoutMs: 5_000, agent, maxAnswerBytes: 1024 });
        expect(cut, path).toMatchObject({ kind: 'network', code: ANSWER_TOO_LARGE });
        const whole = await exchange({ method: 'GET', url, timeoutMs: 5_000, agent, maxAnswerBytes: big.length });
        expect(whole, path).toMatchObject({ kind: 'response', status: 200, body: big.toString() });
      }
    } finally {
      agent.destroy();
      server.closeAllConnections();
      server.close();
    }
  });
});
