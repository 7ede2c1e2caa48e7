// The edge's two ways of reading a body give one answer: a body sent plainly (Content-Length,
// no Content-Encoding, UTF-8) is read in one pass, any other by body-parser, and the same bytes
// sent chunked (so through body-parser) must be answered exactly as sent with a length. And the
// cheaper res.json answers with the bytes and headers express's own would.
import { once } from 'node:events';
import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { describe, expect, test } from 'vitest';
import { edgeFailureOf, errorRenderer, jsonBody, MAX_JSON_DEPTH, MAX_JSON_KEYS } from '../../platform/http-edge.js';
import { rawJsonBody } from '../../platform/json-body.js';
import { cheapJson } from '../../platform/json-response.js';
import { pino } from 'pino';
import { EDGE_ERROR_STATUS, ServiceError, type EdgeFailure } from '../../platform/service-error.js';

class ToyError extends ServiceError {
  constructor(failure: EdgeFailure) {
    super(failure.code, EDGE_ERROR_STATUS[failure.code], failure.message, failure.details);
  }
}

function echoApp(): express.Express {
  const app = express();
  app.set('etag', false);
  cheapJson(app);
  app.post('/echo', jsonBody(), (req, res) => {
    res.json({ body: req.body as unknown });
  });
  app.use(errorRenderer((err) => new ToyError(edgeFailureOf(err, 'toy')), pino({ level: 'silent' })));
  return app;
}

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

/** One request on a real socket: `body` sent with a Content-Length, or chunked in pieces of 7 bytes. */
async function send(
  app: express.Express,
  init: { method?: string; path: string; headers?: Record<string, string>; body?: Buffer; chunked?: boolean },
): Promise<Answer> {
  const server = app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  try {
    const { port } = server.address() as AddressInfo;
    return await new Promise<Answer>((resolve, reject) => {
      const body = init.body ?? Buffer.alloc(0);
      const headers = { 'content-type': 'application/json', ...init.headers };
      if (!init.chunked && init.body !== undefined) Object.assign(headers, { 'content-length': String(body.length) });
      const req = httpRequest(
        { host: '127.0.0.1', port, method: init.method ?? 'POST', path: init.path, headers, agent: false },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () => {
            const { date: _date, ...rest } = res.headers;
            resolve({ status: res.statusCode!, headers: rest, text: Buffer.concat(chunks).toString() });
          });
        },
      );
      req.on('error', reject);
      if (!init.chunked) return void req.end(body);
      for (let i = 0; i < body.length; i += 7) req.write(body.subarray(i, i + 7));
      req.end();
    });
  } finally {
    server.close();
  }
}

const BOM = Buffer.from([0xef, 0xbb, 0xbf]);
const manyKeys = (n: number) => JSON.stringify(Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, 1])));

describe('a body read in one pass and one read by body-parser', () => {
  test.each([
    ['an object', Buffer.from('{"name":"a","n":1}'), 200],
    ['an array', Buffer.from(' [1, "two", {"three": 3}]'), 200],
    ['a BOM before the object', Buffer.concat([BOM, Buffer.from('{"a":1}')]), 200],
    ['a BOM alone (read as {})', BOM, 200],
    ['white space alone', Buffer.from(' \n\t '), 400],
    ['a string at the top', Buffer.from('"text"'), 400],
    ['a number at the top', Buffer.from('12'), 400],
    ['broken JSON', Buffer.from('{"a":1'), 400],
    ['a "__proto__" key', Buffer.from('{"a":{"__proto__":{"b":1}}}'), 400],
    ['a "__proto__" key spelled with an escape', Buffer.from('{"a":[{"\\u005f_proto__":1}]}'), 400],
    ['"__proto__" as a value, and an escaped key that is not it', Buffer.from('{"\\u0061":"__proto__"}'), 200],
    [`JSON ${MAX_JSON_DEPTH} deep`, Buffer.from(`${'['.repeat(MAX_JSON_DEPTH)}${']'.repeat(MAX_JSON_DEPTH)}`), 200],
    [
      `JSON ${MAX_JSON_DEPTH + 1} deep`,
      Buffer.from(`{"a":${'['.repeat(MAX_JSON_DEPTH)}${']'.repeat(MAX_JSON_DEPTH)}}`),
      400,
    ],
    ['brackets inside strings, which nest nothing', Buffer.from(`{"a":"${'['.repeat(100)}"}`), 200],
    [`${MAX_JSON_KEYS} keys`, Buffer.from(manyKeys(MAX_JSON_KEYS)), 200],
    [`${MAX_JSON_KEYS + 1} keys`, Buffer.from(manyKeys(MAX_JSON_KEYS + 1)), 400],
    ['text in UTF-8', Buffer.from('{"κλειδί":"τιμή:","emoji":"🦀"}'), 200],
  ])('%s: the same answer either way', async (_name, body, status) => {
    const app = echoApp();
    const plain = await send(app, { path: '/echo', body });
    const chunked = await send(app, { path: '/echo', body, chunked: true });
    expect(plain.status, plain.text).toBe(status);
    expect(plain.text).toBe(chunked.text);
    expect(plain.status).toBe(chunked.status);
  });

  // Latin-1 sent as JSON: decoded anyway, "Müller" and "Möller" would both be "M\uFFFDller".
  test.each([
    ['a Latin-1 ü in a string', Buffer.from([...Buffer.from('{"id":"M'), 0xfc, ...Buffer.from('ller"}')])],
    ['a lone continuation byte', Buffer.from([...Buffer.from('{"a":"'), 0x80, ...Buffer.from('"}')])],
    ['a UTF-8 sequence cut short', Buffer.from([...Buffer.from('{"a":"'), 0xe2, 0x82, ...Buffer.from('"}')])],
  ])('%s is refused as not UTF-8, either way, by both readers', async (_name, body) => {
    const app = express();
    app.post('/json', jsonBody(), (req, res) => void res.json({ body: req.body as unknown }));
    app.post('/raw', rawJsonBody(), (req, res) => void res.json({ bytes: (req.body as Buffer).length }));
    app.use(errorRenderer((err) => new ToyError(edgeFailureOf(err, 'toy')), pino({ level: 'silent' })));
    for (const path of ['/json', '/raw']) {
      for (const chunked of [false, true]) {
        const res = await send(app, { path, body, chunked });
        expect({ status: res.status, error: JSON.parse(res.text).error }, `${path}, chunked: ${chunked}`).toEqual({
          status: 400,
          error: {
            code: 'invalid_request',
            message: 'The request body is not valid UTF-8; send JSON encoded in UTF-8.',
          },
        });
      }
    }
    const fine = await send(app, { path: '/raw', body: Buffer.from('{"id":"Müller"}'), chunked: true });
    expect(fine.status).toBe(200);
  });

  // A JSON value that is not an object is not called invalid JSON, by either reader.
  test.each([
    ['null', 'null'],
    ['"text"', 'a string'],
    [' 12 ', 'a number'],
    ['true', 'a boolean'],
  ])('%s at the top is refused as %s, not as broken JSON, either way', async (text, kind) => {
    const app = echoApp();
    for (const chunked of [false, true]) {
      const res = await send(app, { path: '/echo', body: Buffer.from(text), chunked });
      expect({ status: res.status, message: JSON.parse(res.text).error?.message }, `chunked: ${chunked}`).toEqual({
        status: 400,
        message: `The request body is JSON, but ${kind} rather than an object; send a JSON object.`,
      });
    }
    const broken = await send(app, { path: '/echo', body: Buffer.from('nul') });
    expect(JSON.parse(broken.text).error?.message).toBe('The request body is not valid JSON; send a JSON object.');
  });

  test('Content-Length: 0 is read as {}; charset=utf-8 is read in one pass as without it', async () => {
    const app = echoApp();
    const empty = await send(app, { path: '/echo', body: Buffer.alloc(0) });
    expect({ status: empty.status, text: empty.text }).toEqual({ status: 200, text: '{"body":{}}' });
    const typed = await send(app, {
      path: '/echo',
      headers: { 'content-type': 'application/json; charset=UTF-8' },
      body: Buffer.from('{"a":1}'),
    });
    expect({ status: typed.status, text: typed.text }).toEqual({ status: 200, text: '{"body":{"a":1}}' });
  });
});

describe('the cheaper res.json', () => {
  function answering(cheap: boolean, route: (res: express.Response) => void): express.Express {
    const app = express();
    app.disable('x-powered-by');
    app.set('etag', false);
    if (cheap) cheapJson(app);
    app.all('/x', (_req, res) => route(res));
    return app;
  }

  test.each<[string, (res: express.Response) => void, { method?: string; headers?: Record<string, string> }]>([
    ['an object', (res) => void res.json({ ok: true, n: [1, 2], s: 'κ' }), {}],
    ['a status and a header set before', (res) => void res.status(201).set('X-Request-Id', 'r1').json({ a: 1 }), {}],
    ['a long answer', (res) => void res.json({ text: 'x'.repeat(5000) }), {}],
    ['null', (res) => void res.json(null), {}],
    ['undefined', (res) => void res.json(undefined), {}],
    ['a HEAD', (res) => void res.json({ ok: true }), { method: 'HEAD' }],
    ['a conditional GET', (res) => void res.json({ ok: true }), { method: 'GET', headers: { 'if-none-match': '*' } }],
    ['a Content-Type set before', (res) => void res.type('application/problem+json').json({ a: 1 }), {}],
    ['a 204', (res) => void res.status(204).json({ a: 1 }), {}],
  ])('%s: the same status, headers and bytes as express', async (_name, route, init) => {
    const method = init.method ?? 'GET';
    const theirs = await send(answering(false, route), { path: '/x', method, headers: init.headers ?? {} });
    const ours = await send(answering(true, route), { path: '/x', method, headers: init.headers ?? {} });
    expect(ours).toEqual(theirs);
  });
});
