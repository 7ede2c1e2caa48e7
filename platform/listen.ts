// Listening and stopping, for all three services: bind to a host, report the URL; hold slow and
// numerous clients to limits; on close stop accepting, let requests in flight finish within a
// grace period, then cut what is left.
import { createServer, type RequestListener, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { OptionNames } from './option-names.js';

/** What a client may take of a service: how slowly it may send a request, and how many connections it may hold. */
export interface ServerLimits {
  /**
   * A new connection must send its first byte within this long (default 3 s, or
   * `headersTimeoutMs` when that is shorter), or it is closed: a connection that says nothing
   * holds one of `maxConnections`' places for no request.
   */
  firstByteTimeoutMs?: number | undefined;
  /** A request's headers must arrive within this long (default 10 s), or the connection is cut. */
  headersTimeoutMs?: number | undefined;
  /**
   * The whole request, body included, must arrive within this long (default 30 s). It covers
   * receiving only: an answer that takes longer (a long-polling claim) is not cut.
   */
  requestTimeoutMs?: number | undefined;
  /**
   * Connections held at once (default 1024); more are closed as they arrive. It bounds the
   * sockets and memory the service spends on clients; it does not share them out fairly, so one
   * client that keeps opening connections can still take every place (see docs/threat-model.md).
   */
  maxConnections?: number | undefined;
}

/**
 * The option names every service's start function has for listening: where (`host`, `port`) and
 * its ServerLimits (platform/option-names.ts).
 */
export const LISTEN_OPTION_NAMES: OptionNames<ServerLimits & { host?: string; port?: number }> = {
  firstByteTimeoutMs: true,
  headersTimeoutMs: true,
  requestTimeoutMs: true,
  maxConnections: true,
  port: true,
  host: true,
};

/** Only the limits of `options` (a service's options hold many other things). */
export function serverLimitsOf(options: ServerLimits): ServerLimits {
  const { firstByteTimeoutMs, headersTimeoutMs, requestTimeoutMs, maxConnections } = options;
  return { firstByteTimeoutMs, headersTimeoutMs, requestTimeoutMs, maxConnections };
}

export interface ListenOptions extends ServerLimits {
  /** How long requests in flight get on close before their sockets are cut (default 2 s). */
  graceMs?: number;
}

export const LISTEN_DEFAULTS = {
  graceMs: 2_000,
  firstByteTimeoutMs: 3_000,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  maxConnections: 1_024,
} as const;

/** Clients keep connections alive; a short server keep-alive stops idle sockets piling up. */
const KEEP_ALIVE_MS = 5_000;

/** Defaults filled in and ranges checked; a RangeError names the option at fault. */
export function resolveListenOptions(options: ListenOptions = {}): Required<ListenOptions> {
  const headersTimeoutMs = atLeast('headersTimeoutMs', options.headersTimeoutMs ?? LISTEN_DEFAULTS.headersTimeoutMs, 1);
  const resolved = {
    graceMs: atLeast('graceMs', options.graceMs ?? LISTEN_DEFAULTS.graceMs, 0),
    firstByteTimeoutMs: atLeast(
      'firstByteTimeoutMs',
      options.firstByteTimeoutMs ?? Math.min(LISTEN_DEFAULTS.firstByteTimeoutMs, headersTimeoutMs),
      1,
    ),
    headersTimeoutMs,
    requestTimeoutMs: atLeast('requestTimeoutMs', options.requestTimeoutMs ?? LISTEN_DEFAULTS.requestTimeoutMs, 1),
    maxConnections: atLeast('maxConnections', options.maxConnections ?? LISTEN_DEFAULTS.maxConnections, 1),
  };
  // The first byte is the start of the headers: a longer wait for it would never be reached.
  if (resolved.firstByteTimeoutMs > resolved.headersTimeoutMs) {
    throw new RangeError(
      `firstByteTimeoutMs (${resolved.firstByteTimeoutMs}) must not be longer than headersTimeoutMs (${resolved.headersTimeoutMs}).`,
    );
  }
  // Node refuses a header timeout longer than the request's: the headers are part of the request.
  if (resolved.headersTimeoutMs > resolved.requestTimeoutMs) {
    throw new RangeError(
      `headersTimeoutMs (${resolved.headersTimeoutMs}) must not be longer than requestTimeoutMs (${resolved.requestTimeoutMs}).`,
    );
  }
  return resolved;
}

function atLeast(name: string, value: number, min: number): number {
  if (!Number.isSafeInteger(value) || value < min) {
    throw new RangeError(`${name} must be an integer of at least ${min}, not ${String(value)}.`);
  }
  return value;
}

/**
 * `port` when it is one a service can listen on, 0 (a free port) when it is left out. A string
 * would not fail: Node would listen on a Unix socket of that name in the working folder.
 */
export function checkPort(port: unknown): number {
  if (port === undefined) return 0;
  if (typeof port !== 'number' || !Number.isInteger(port) || port < 0 || port > 65_535) {
    throw new RangeError(
      `port must be an integer from 0 to 65535 (0 picks a free port), not ${typeof port === 'string' ? JSON.stringify(port) : String(port)}.`,
    );
  }
  return port;
}

/** `host` when it is a non-empty string, 127.0.0.1 when it is left out. */
export function checkHost(host: unknown): string {
  if (host === undefined) return '127.0.0.1';
  if (typeof host !== 'string' || host === '') {
    throw new TypeError(
      `host must be an address or a host name such as 127.0.0.1, not ${JSON.stringify(host) ?? String(host)}.`,
    );
  }
  return host;
}

export interface Listening {
  server: Server;
  /** `http://<host>:<port>`, without a trailing slash. */
  url: string;
  port: number;
  /** Stops accepting; requests in flight get `graceMs` (default: listen's) before their sockets are cut. Safe to call twice. */
  close(graceMs?: number): Promise<void>;
}

export async function listen(
  app: RequestListener,
  host: string,
  port: number,
  options: ListenOptions = {},
): Promise<Listening> {
  const limits = resolveListenOptions(options);
  const server = createServer(
    {
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      // Node checks both timeouts on this interval (30 s by default, which would let a slow client
      // keep a socket that long past its limit): check often enough to cut within a quarter of it.
      connectionsCheckingInterval: Math.max(10, Math.min(1_000, Math.floor(limits.headersTimeoutMs / 4))),
    },
    app,
  );
  server.keepAliveTimeout = Math.min(KEEP_ALIVE_MS, limits.headersTimeoutMs);
  server.maxConnections = limits.maxConnections;
  server.on('connection', (socket) => closeIfSilent(socket, limits.firstByteTimeoutMs));
  server.on('clientError', answerClientError);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  let closing: Promise<void> | undefined;
  const close = (grace = limits.graceMs) =>
    (closing ??= new Promise<void>((resolve) => {
      const cut = setTimeout(() => server.closeAllConnections(), grace);
      server.close(() => {
        clearTimeout(cut);
        resolve();
      });
      server.closeIdleConnections();
    }));
  return { server, url: `http://${shownHost}:${address.port}`, port: address.port, close };
}

/**
 * What Node.js answers itself, before any route sees the request, in the services' error shape
 * (`{"error": {code, message}}`) rather than its bare status line: headers past Node's limit
 * (16 KiB, a very long URL among them), a request that is not HTTP/1.1, headers or a body too
 * slow to arrive. Only on a connection that has had no answer written yet, as Node itself does:
 * otherwise an answer may be on its way, and the connection is only closed.
 */
function answerClientError(err: NodeJS.ErrnoException, socket: Socket): void {
  if (err.code === 'ECONNRESET' || !socket.writable || socket.bytesWritten > 0) {
    socket.destroy();
    return;
  }
  const [status, reason, code, message] =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? [
          431,
          'Request Header Fields Too Large',
          'headers_too_large',
          'The request line and headers are larger than 16 KiB; send a shorter URL and fewer or shorter headers.',
        ]
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [
            408,
            'Request Timeout',
            'request_timeout',
            'The request did not arrive in time; the connection is closed. Send it again, whole.',
          ]
        : [400, 'Bad Request', 'invalid_request', 'The request is not valid HTTP/1.1; the connection is closed.'];
  const body = JSON.stringify({ error: { code, message } });
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

/**
 * Closes `socket` unless it has sent a byte within `ms`. Node's own header timeout counts from
 * the connection too, but it is sized for a slow client's headers (10 s), and a thousand silent
 * connections would hold every place that long.
 */
function closeIfSilent(socket: Socket, ms: number): void {
  const timer = setTimeout(() => {
    if (socket.bytesRead === 0) socket.destroy();
  }, ms);
  timer.unref();
  socket.once('close', () => clearTimeout(timer));
}
