// The JSON peer every client stands on, against a bare HTTP server: each outcome of an exchange
// becomes the service's error (an error answer rebuilt, no answer `<service>_unavailable`), an
// abort the signal's reason; healthy() and close() as each client has them.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterEach, describe, expect, test } from 'vitest';
import { keepAliveAgent } from '../../platform/exchange.js';
import { JsonPeer, type JsonPeerOptions, type PeerRequest } from '../../platform/json-peer.js';
import { EDGE_ERROR_STATUS, ServiceError } from '../../platform/service-error.js';

const STATUS = { ...EDGE_ERROR_STATUS, toy_refused: 409, toy_unavailable: 503 } as const;
type Code = keyof typeof STATUS;

class ToyError extends ServiceError<Code> {
  override readonly name = 'ToyError';
  readonly answered: number | undefined;
  constructor(code: Code, message: string, details: Record<string, unknown> = {}, status?: number) {
    super(code, STATUS[code], message, details);
    this.answered = status;
  }
}

class ToyClient extends JsonPeer<ToyError> {
  constructor(baseUrl: string, options: JsonPeerOptions = {}) {
    super(
      baseUrl,
      options,
      { timeoutMs: 2_000, maxAnswerBytes: 1024 },
      {
        service: 'toy',
        table: STATUS,
        create: (code, message, details, status) => new ToyError(code, message, details, status),
        afterTimeout: 'it may have been applied.',
        afterUnreachable: 'try again later.',
      },
    );
  }
  request(request: PeerRequest) {
    return this.call(request);
  }
}

const closers: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

/** A server answering each request with `handler`; every request it saw is kept. */
async function toyServer(handler: (req: IncomingMessage, res: ServerResponse, body: string) => void) {
  const seen: Array<{ method: string; url: string; headers: IncomingMessage['headers']; body: string }> = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      seen.push({ method: req.method!, url: req.url!, headers: req.headers, body });
      handler(req, res, body);
    });
  });
  const sockets = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/base`, seen, open: () => sockets.size };
}

function client(url: string, options: JsonPeerOptions = {}) {
  const c = new ToyClient(url, options);
  closers.push(() => c.close());
  return c;
}

function answer(res: ServerResponse, status: number, body: unknown) {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    (value) => {
      throw new Error(`expected a rejection, got ${JSON.stringify(value)}`);
    },
    (err: unknown) => err,
  );
}

describe('JsonPeer', () => {
  test('sends JSON under the base path with the key and the request id, and returns an answer below 400', async () => {
    const server = await toyServer((_req, res) => answer(res, 201, { ok: true }));
    const toy = client(server.url, { apiKey: 'k1' });
    const res = await toy.request({
      method: 'POST',
      path: ['things', 'a/b'],
      query: new URLSearchParams({ n: '1' }),
      json: { x: 1 },
      requestId: 'req-7',
    });
    expect({ status: res.status, body: res.body }).toEqual({ status: 201, body: { ok: true } });
    const [sent] = server.seen;
    expect({
      method: sent?.method,
      url: sent?.url,
      body: sent?.body,
      authorization: sent?.headers.authorization,
      requestId: sent?.headers['x-request-id'],
      type: sent?.headers['content-type'],
    }).toEqual({
      method: 'POST',
      url: '/base/things/a%2Fb?n=1',
      body: '{"x":1}',
      authorization: 'Bearer k1',
      requestId: 'req-7',
      type: 'application/json',
    });
  });

  test("an error answer in the service's shape comes back as its error, with code, details and the status answered", async () => {
    const server = await toyServer((_req, res) =>
      answer(res, 409, { error: { code: 'toy_refused', message: 'No.', why: 'because' } }),
    );
    const err = (await rejection(client(server.url).request({ method: 'GET', path: ['x'] }))) as ToyError;
    expect(err).toBeInstanceOf(ToyError);
    expect({ code: err.code, message: err.message, details: err.details, answered: err.answered }).toEqual({
      code: 'toy_refused',
      message: 'No.',
      details: { why: 'because' },
      answered: 409,
    });
  });

  test('an error answer without a known code is internal (5xx) or invalid_request (4xx), naming the status', async () => {
    const server = await toyServer((req, res) =>
      req.url === '/base/five'
        ? res.writeHead(502).end('<html>bad gateway</html>')
        : answer(res, 418, { error: { code: 'teapot' } }),
    );
    const toy = client(server.url);
    const five = (await rejection(toy.request({ method: 'GET', path: ['five'] }))) as ToyError;
    const four = (await rejection(toy.request({ method: 'GET', path: ['four'] }))) as ToyError;
    expect([five, four].map((e) => ({ code: e.code, message: e.message, details: e.details }))).toEqual([
      {
        code: 'internal',
        message: 'The toy answered 502 without a recognisable error body.',
        details: { status: 502 },
      },
      {
        code: 'invalid_request',
        message: 'The toy answered 418 without a recognisable error body.',
        details: { status: 418 },
      },
    ]);
  });

  test('no answer within the timeout is <service>_unavailable saying it timed out', async () => {
    const server = await toyServer(() => {});
    const err = (await rejection(
      client(server.url).request({ method: 'POST', path: ['slow'], json: {}, timeoutMs: 200 }),
    )) as ToyError;
    expect({ code: err.code, status: err.status }).toEqual({ code: 'toy_unavailable', status: 503 });
    expect(err.message).toBe(
      `The toy at ${new URL(server.url).origin} did not answer within 200 ms (timed out); it may have been applied.`,
    );
  });

  test('nobody listening is <service>_unavailable saying it could not be reached, and healthy() is false', async () => {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    await new Promise<void>((resolve) => server.close(() => resolve()));
    const toy = client(`http://127.0.0.1:${port}`);
    const err = (await rejection(toy.request({ method: 'GET', path: ['x'] }))) as ToyError;
    expect(err.code).toBe('toy_unavailable');
    expect(err.message).toMatch(
      /^The toy at http:\/\/127\.0\.0\.1:\d+ could not be reached \(ECONNREFUSED: .*\); try again later\.$/,
    );
    expect(await toy.healthy()).toBe(false);
  });

  test('an answer over maxAnswerBytes is <service>_unavailable', async () => {
    const server = await toyServer((_req, res) => answer(res, 200, { filler: 'x'.repeat(4096) }));
    const err = (await rejection(client(server.url).request({ method: 'GET', path: ['big'] }))) as ToyError;
    expect(err.code).toBe('toy_unavailable');
  });

  test("an aborted call rejects with the signal's reason, never the service's error; healthy() passes it on", async () => {
    const server = await toyServer(() => {});
    const toy = client(server.url);
    const controller = new AbortController();
    setTimeout(() => controller.abort(new Error('gave up')), 100);
    expect(await rejection(toy.request({ method: 'GET', path: ['x'], signal: controller.signal }))).toEqual(
      new Error('gave up'),
    );
    expect(await rejection(toy.healthy({ signal: AbortSignal.abort(new Error('gone')) }))).toEqual(new Error('gone'));
  });

  test('a body that is not JSON is the caller’s TypeError, and nothing is sent', async () => {
    const server = await toyServer((_req, res) => answer(res, 200, {}));
    const err = await rejection(client(server.url).request({ method: 'POST', path: ['x'], json: { n: 1n } }));
    expect(err).toBeInstanceOf(TypeError);
    expect(server.seen).toEqual([]);
  });

  test('healthy() is true on a 200 from /healthz and false on any error answer', async () => {
    let status = 200;
    const server = await toyServer((_req, res) => answer(res, status, status === 200 ? { ok: true } : {}));
    const toy = client(server.url);
    expect(await toy.healthy()).toBe(true);
    status = 503;
    expect(await toy.healthy()).toBe(false);
    expect(server.seen.map((s) => s.url)).toEqual(['/base/healthz', '/base/healthz']);
  });

  test('a timeout out of range is a RangeError at construction and per call', async () => {
    expect(() => new ToyClient('http://127.0.0.1:1', { timeoutMs: 0 })).toThrow(RangeError);
    const toy = client('http://127.0.0.1:1');
    await expect(toy.request({ method: 'GET', path: [], timeoutMs: 2 ** 31 })).rejects.toThrow(RangeError);
  });

  test("close() ends the client's own connections but leaves an agent passed in open", async () => {
    const server = await toyServer((_req, res) => answer(res, 200, {}));
    const shared = keepAliveAgent();
    closers.push(() => shared.destroy());
    const borrowing = new ToyClient(server.url, { agent: shared });
    await borrowing.request({ method: 'GET', path: ['x'] });
    borrowing.close();
    const owning = new ToyClient(server.url);
    await owning.request({ method: 'GET', path: ['x'] });
    expect(server.open()).toBe(2);
    owning.close();
    await until(() => server.open() === 1);
    expect(Object.values(shared.freeSockets).flat().length).toBe(1);
  });
});

async function until(condition: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`the condition did not hold within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
