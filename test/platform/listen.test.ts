// Slow and numerous clients against listen(): connections that send nothing, headers and whole
// requests that arrive too slowly are cut, connections past the cap are closed, and an answer that takes long (a long poll) is
// never cut, since the request timeout covers receiving the request only.
import { request as httpRequest } from 'node:http';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, test } from 'vitest';
import { listen, LISTEN_DEFAULTS, resolveListenOptions, type Listening } from '../../platform/listen.js';
import { QueueClient } from '../../queue/client.js';
import { startQueue } from '../../queue/service.js';
import { tempDir } from '../helpers/tmp.js';

const closers: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

async function serve(limits: Parameters<typeof listen>[3], answerAfterMs = 0): Promise<Listening> {
  const listening = await listen(
    (req, res) => {
      req.resume();
      req.on('end', () => setTimeout(() => res.end('ok'), answerAfterMs));
    },
    '127.0.0.1',
    0,
    limits,
  );
  closers.push(() => listening.close(0));
  return listening;
}

/** A raw connection, and when (ms after `write` began) and how the server ended it. */
function rawClient(port: number): { socket: Socket; received: () => string; closed: Promise<number> } {
  const socket = connect(port, '127.0.0.1');
  closers.push(() => void socket.destroy());
  const started = Date.now();
  let text = '';
  socket.on('data', (chunk: Buffer) => (text += chunk.toString()));
  socket.on('error', () => {});
  const closed = new Promise<number>((resolve) => socket.on('close', () => resolve(Date.now() - started)));
  return { socket, received: () => text, closed };
}

/** The JSON body of a raw HTTP answer. */
function answerBody(raw: string): unknown {
  const at = raw.indexOf('\r\n\r\n');
  return at < 0 ? undefined : JSON.parse(raw.slice(at + 4));
}

// Node.js answers these before any route runs; the answer still has the services' error shape.
describe('listen: requests Node.js refuses before the app sees them', () => {
  test.each([
    [
      'a URL past 16 KiB of headers',
      `GET /jobs/${'x'.repeat(20_000)} HTTP/1.1\r\nHost: x\r\n\r\n`,
      431,
      'headers_too_large',
      'The request line and headers are larger than 16 KiB; send a shorter URL and fewer or shorter headers.',
    ],
    [
      'a request line that is not HTTP',
      'GARBAGE\r\n\r\n',
      400,
      'invalid_request',
      'The request is not valid HTTP/1.1; the connection is closed.',
    ],
  ])(
    '%s: %i with {"error": {code, message}}, then the connection closes',
    async (_name, raw, status, code, message) => {
      const { port } = await serve({});
      const client = rawClient(port);
      client.socket.write(raw);
      await client.closed;
      const answer = client.received();
      expect(answer.split('\r\n')[0]).toMatch(new RegExp(`^HTTP/1\\.1 ${status} `));
      expect(answer).toMatch(/\r\ncontent-type: application\/json; charset=utf-8\r\n/i);
      expect(answerBody(answer)).toEqual({ error: { code, message } });
    },
  );
});

describe('listen: slow clients', () => {
  test('headers that do not arrive within headersTimeoutMs: the connection is cut', async () => {
    const { port } = await serve({ headersTimeoutMs: 300, requestTimeoutMs: 1_000 });
    const client = rawClient(port);
    client.socket.write('POST / HTTP/1.1\r\nHost: x\r\n'); // and never the blank line
    const afterMs = await client.closed;
    expect(afterMs).toBeGreaterThanOrEqual(250);
    expect(afterMs).toBeLessThan(2_000);
    expect(client.received()).toMatch(/^HTTP\/1\.1 408/);
    expect(answerBody(client.received())).toEqual({
      error: {
        code: 'request_timeout',
        message: 'The request did not arrive in time; the connection is closed. Send it again, whole.',
      },
    });
  });

  test('a body that does not arrive within requestTimeoutMs: the connection is cut', async () => {
    const { port } = await serve({ headersTimeoutMs: 200, requestTimeoutMs: 600 });
    const client = rawClient(port);
    client.socket.write('POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n');
    const drip = setInterval(() => client.socket.write('x'), 100);
    closers.push(() => clearInterval(drip));
    const afterMs = await client.closed;
    expect(afterMs).toBeGreaterThanOrEqual(500);
    expect(afterMs).toBeLessThan(3_000);
    expect(client.received()).not.toMatch(/ok$/);
  });

  test('an answer that takes longer than requestTimeoutMs is not cut: the timeout covers receiving only', async () => {
    const { url } = await serve({ headersTimeoutMs: 200, requestTimeoutMs: 400 }, 1_200);
    const res = await fetch(url, { method: 'POST', body: 'x' });
    expect({ status: res.status, text: await res.text() }).toEqual({ status: 200, text: 'ok' });
  });

  test("a queue's long-polling claim outlasting requestTimeoutMs is answered, not cut", async () => {
    const queue = await startQueue({
      db: join(tempDir('leasehold-listen-'), 'queue.sqlite'),
      headersTimeoutMs: 300,
      requestTimeoutMs: 500,
    });
    closers.push(() => queue.close());
    const client = new QueueClient(queue.url);
    closers.push(() => client.close());
    const started = Date.now();
    const waited = client.claimMany('w1', { max: 1, waitMs: 1_500 });
    setTimeout(() => void client.enqueue({ id: 'late', qty: 1 }), 1_200);
    const leases = await waited;
    expect(leases.map((lease) => lease.id)).toEqual(['late']);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_100);
  });
});

/** A GET on its own connection: its status, or the socket error that ended it. */
function getOnce(port: number): Promise<number | string> {
  return new Promise((resolve) => {
    const req = httpRequest({ host: '127.0.0.1', port, path: '/', agent: false, timeout: 2_000 }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('timeout', () => req.destroy(new Error('no answer within 2 s')));
    req.on('error', (err) => resolve(err.message));
    req.end();
  });
}

describe('listen: silent connections', () => {
  test('a connection that sends no byte is closed after firstByteTimeoutMs; one that has begun is held to headersTimeoutMs', async () => {
    const { port } = await serve({ firstByteTimeoutMs: 300, headersTimeoutMs: 3_000, requestTimeoutMs: 5_000 });
    const silent = rawClient(port);
    const begun = rawClient(port);
    begun.socket.write('POST / HTTP/1.1\r\n');
    const afterMs = await silent.closed;
    expect(afterMs).toBeGreaterThanOrEqual(250);
    expect(afterMs).toBeLessThan(2_000);
    expect(silent.received()).toBe('');
    await new Promise((resolve) => setTimeout(resolve, 700));
    begun.socket.write('Host: x\r\nContent-Length: 0\r\n\r\n');
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(begun.received()).toMatch(/^HTTP\/1\.1 200/);
  });

  test('1,100 connections that say nothing keep a request out for about firstByteTimeoutMs, not headersTimeoutMs', async () => {
    // The default cap (1024) and header timeout (10 s); silent connections dropped after 1 s.
    const { port } = await serve({ firstByteTimeoutMs: 1_000 });
    // Opened 100 at a time, so the listen backlog never overflows: a SYN dropped from a full backlog
    // is sent again by the kernel seconds later, which on a loaded machine outlasts the test.
    const silent: Array<ReturnType<typeof rawClient>> = [];
    for (let opened = 0; opened < 1_100; opened += 100) {
      const batch = Array.from({ length: 100 }, () => rawClient(port));
      await Promise.all(
        batch.map(
          ({ socket }) => new Promise((resolve) => (socket.once('connect', resolve), socket.once('close', resolve))),
        ),
      );
      silent.push(...batch);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
    const started = Date.now();
    const tries: Array<number | string> = [];
    for (;;) {
      const answer = await getOnce(port);
      tries.push(answer);
      if (answer === 200 || Date.now() - started > 15_000) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const servedAfterMs = Date.now() - started;
    expect(tries.at(-1), `answers: ${tries.join(', ')}`).toBe(200);
    // Without the first-byte timeout the silent connections hold every place for 10 s.
    expect(servedAfterMs).toBeLessThan(5_000);
    const closedAfterMs = await Promise.all(silent.map(({ closed }) => closed));
    expect(Math.max(...closedAfterMs)).toBeLessThan(6_000);
  });
});

describe('listen: many clients', () => {
  test('connections past maxConnections are closed as they arrive; those held are served', async () => {
    const { port } = await serve({ maxConnections: 2 });
    const held = [rawClient(port), rawClient(port)];
    await Promise.all(held.map(({ socket }) => new Promise((resolve) => socket.once('connect', resolve))));
    // Give the server a moment to count both before the third arrives.
    await new Promise((resolve) => setTimeout(resolve, 100));
    const third = rawClient(port);
    const afterMs = await third.closed;
    expect(afterMs).toBeLessThan(1_000);
    expect(third.received()).toBe('');
    const first = held[0]!;
    first.socket.write('POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n');
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(first.received()).toMatch(/^HTTP\/1\.1 200/);
  });
});

describe('listen: options', () => {
  test('defaults: headers within 10 s, the request within 30 s, 1024 connections', async () => {
    expect(resolveListenOptions()).toEqual({ ...LISTEN_DEFAULTS });
    const { server } = await serve({});
    expect({
      headersTimeout: server.headersTimeout,
      requestTimeout: server.requestTimeout,
      maxConnections: server.maxConnections,
    }).toEqual({ headersTimeout: 10_000, requestTimeout: 30_000, maxConnections: 1_024 });
  });

  test('firstByteTimeoutMs defaults to 3 s, or to headersTimeoutMs when that is shorter', () => {
    expect(resolveListenOptions().firstByteTimeoutMs).toBe(3_000);
    expect(resolveListenOptions({ headersTimeoutMs: 500, requestTimeoutMs: 1_000 }).firstByteTimeoutMs).toBe(500);
    expect(resolveListenOptions({ firstByteTimeoutMs: 200 }).firstByteTimeoutMs).toBe(200);
  });

  test.each([
    [{ firstByteTimeoutMs: 0 }, /firstByteTimeoutMs must be an integer of at least 1/],
    [{ firstByteTimeoutMs: 5_000, headersTimeoutMs: 4_000 }, /must not be longer than headersTimeoutMs/],
    [{ headersTimeoutMs: 0 }, /headersTimeoutMs must be an integer of at least 1/],
    [{ requestTimeoutMs: 1.5 }, /requestTimeoutMs must be an integer/],
    [{ maxConnections: -1 }, /maxConnections must be an integer of at least 1/],
    [{ headersTimeoutMs: 5_000, requestTimeoutMs: 1_000 }, /must not be longer than requestTimeoutMs/],
  ])('%j is refused with a RangeError naming the option', (options, reason) => {
    expect(() => resolveListenOptions(options)).toThrow(reason);
  });
});
