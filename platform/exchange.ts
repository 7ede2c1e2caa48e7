// JSON over HTTP/1.1 on a keep-alive agent: one connection pool per client, no per-request
// connection setup, a timeout that covers the whole exchange, an answer read up to a size limit,
// and cancellation by AbortSignal.
// One exchange is reported as a value instead of thrown: a response, or exactly which way it
// failed (timeout, reset, refused, other network error, aborted). The gateway's retry rules
// need that distinction, and the queue's client tells an abort from an unreachable queue by it.
import http from 'node:http';
import { describeValue } from './describe-value.js';
import { currentRequestId, REQUEST_ID_HEADER } from './request-id.js';

export type Exchange =
  | { kind: 'response'; status: number; headers: http.IncomingHttpHeaders; body: unknown }
  /** No complete answer within `timeoutMs`: the request may or may not have been processed. */
  | { kind: 'timeout'; timeoutMs: number }
  /** The connection broke after it was made (ECONNRESET, EPIPE, cut mid-answer). */
  | { kind: 'reset'; code: string; message: string }
  /** Nobody listens there (ECONNREFUSED): the request never reached a server. */
  | { kind: 'refused'; code: string; message: string }
  /**
   * Any other socket-level failure (DNS, unreachable host...), or an answer larger than
   * `maxAnswerBytes` (code ERR_ANSWER_TOO_LARGE), which is not read further.
   */
  | { kind: 'network'; code: string; message: string }
  /** The caller's AbortSignal fired. */
  | { kind: 'aborted' };

export interface ExchangeRequest {
  method: 'GET' | 'POST';
  url: URL;
  /** Sent as is, so a signature computed over these bytes stays valid. */
  body?: Buffer;
  headers?: Record<string, string>;
  /** Covers the whole exchange, from connecting to the last byte of the answer. */
  timeoutMs: number;
  agent: http.Agent;
  signal?: AbortSignal | undefined;
  /** The largest answer body read (default DEFAULT_MAX_ANSWER_BYTES); a larger one fails the exchange. */
  maxAnswerBytes?: number;
}

/** What an exchange buffers of an answer unless told otherwise: a peer cannot make a caller hold more. */
export const DEFAULT_MAX_ANSWER_BYTES = 8 * 1024 * 1024;

/** The code of a `network` failure for an answer over `maxAnswerBytes`. */
export const ANSWER_TOO_LARGE = 'ERR_ANSWER_TOO_LARGE';

/** The message of a `reset` for an answer cut before its last byte (the connection was made and answered). */
export const CUT_MID_ANSWER = 'the connection closed mid-answer';

const RESET_CODES = new Set(['ECONNRESET', 'EPIPE', 'ECONNABORTED', 'ERR_STREAM_PREMATURE_CLOSE', 'UND_ERR_SOCKET']);

/**
 * Never rejects: every outcome is an Exchange, settled exactly once. Whatever the outcome, the
 * timer is cleared and the abort listener removed, so one long-lived signal can serve any
 * number of sequential requests. A timeout or an abort destroys the request's socket: the
 * agent must not hand a connection with an answer still on its way to the next request.
 */
export function exchange(req: ExchangeRequest): Promise<Exchange> {
  return new Promise((resolve) => {
    if (req.signal?.aborted) {
      resolve({ kind: 'aborted' });
      return;
    }
    const maxAnswerBytes = req.maxAnswerBytes ?? DEFAULT_MAX_ANSWER_BYTES;
    let settled = false;
    let cause: 'timeout' | 'aborted' | undefined;
    const settle = (result: Exchange) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      req.signal?.removeEventListener('abort', onAbort);
      resolve(result);
    };
    const fail = (err: unknown) => {
      if (cause === 'timeout') settle({ kind: 'timeout', timeoutMs: req.timeoutMs });
      else if (cause === 'aborted') settle({ kind: 'aborted' });
      else settle(networkFailure(err));
    };

    const outgoing = http.request(
      req.url,
      {
        method: req.method,
        agent: req.agent,
        headers: {
          accept: 'application/json',
          ...(req.body ? { 'content-type': 'application/json', 'content-length': String(req.body.length) } : {}),
          ...requestIdHeader(),
          ...req.headers,
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        let received = 0;
        const tooLarge = () => {
          settle({
            kind: 'network',
            code: ANSWER_TOO_LARGE,
            message: `the answer was larger than ${maxAnswerBytes} bytes, so it was not read`,
          });
          outgoing.destroy();
        };
        if (Number(res.headers['content-length'] ?? 0) > maxAnswerBytes) return tooLarge();
        res.on('data', (chunk: Buffer) => {
          received += chunk.length;
          if (received > maxAnswerBytes) tooLarge();
          else chunks.push(chunk);
        });
        // Closed before the last byte: the answer was cut, which is a reset whatever Node reports
        // (an `aborted` error first, or only a close).
        const cut = () => fail(Object.assign(new Error(CUT_MID_ANSWER), { code: 'ECONNRESET' }));
        res.on('error', (err) => (res.complete ? fail(err) : cut()));
        res.on('end', () => {
          settle({ kind: 'response', status: res.statusCode ?? 0, headers: res.headers, body: parseBody(chunks) });
        });
        res.on('close', () => {
          if (!res.complete) cut();
        });
      },
    );
    const timer = setTimeout(() => {
      cause = 'timeout';
      outgoing.destroy(new Error(`no complete answer within ${req.timeoutMs} ms`));
    }, req.timeoutMs);
    const onAbort = () => {
      cause = 'aborted';
      outgoing.destroy(new Error('aborted by the caller'));
    };
    req.signal?.addEventListener('abort', onAbort, { once: true });
    outgoing.on('error', fail);
    outgoing.end(req.body);
  });
}

/** A call made while a request is handled passes its id on, unless the caller names its own. */
function requestIdHeader(): Record<string, string> {
  const id = currentRequestId();
  return id === undefined ? {} : { [REQUEST_ID_HEADER]: id };
}

function networkFailure(err: unknown): Exchange {
  const code = String((err as { code?: unknown } | null)?.code ?? 'UNKNOWN');
  const message = err instanceof Error ? err.message : String(err);
  if (code === 'ECONNREFUSED') return { kind: 'refused', code, message };
  if (RESET_CODES.has(code) || message === 'socket hang up') return { kind: 'reset', code, message };
  return { kind: 'network', code, message };
}

/** An answer's body: JSON when it parses, else the text as is (an error page, say); undefined when empty. */
function parseBody(chunks: Buffer[]): unknown {
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.length === 0) return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

/**
 * The URL of `segments` under `base`, keeping any path the base has (`http://host/prefix` and
 * `http://host/prefix/` both give `http://host/prefix/jobs`). Each segment is encoded whole,
 * so a job id with `/`, `?` or `#` stays one segment. The base's own query is dropped.
 */
export function urlUnder(base: URL, segments: readonly string[], query?: URLSearchParams): URL {
  const url = new URL(base.href);
  const prefix = url.pathname.endsWith('/') ? url.pathname : `${url.pathname}/`;
  url.pathname = `${prefix}${segments.map(encodeURIComponent).join('/')}`;
  url.search = query && query.size > 0 ? `?${query}` : '';
  url.hash = '';
  return url;
}

/** The error object of an error answer, `{error: {code, message, ...details}}`, split up. */
export interface AnsweredError {
  code: string;
  /** Undefined when the answer had none. */
  message: string | undefined;
  details: Record<string, unknown>;
}

/** The error inside an answer's body, or undefined when the body is not in the services' error shape. */
export function errorInBody(body: unknown): AnsweredError | undefined {
  const error = (body as { error?: unknown } | null | undefined)?.error;
  if (error === null || typeof error !== 'object' || Array.isArray(error)) return undefined;
  const { code, message, ...details } = error as Record<string, unknown>;
  if (typeof code !== 'string') return undefined;
  return { code, message: typeof message === 'string' ? message : undefined, details };
}

/** setTimeout fires at once for anything above this, so a larger timeout would be no timeout at all. */
const MAX_TIMEOUT_MS = 2 ** 31 - 1;

/** `timeoutMs` when a timer can keep it; a RangeError naming the range otherwise. */
export function checkedTimeoutMs(timeoutMs: number): number {
  if (!(timeoutMs >= 1 && timeoutMs <= MAX_TIMEOUT_MS)) {
    throw new RangeError(`timeoutMs must be between 1 and ${MAX_TIMEOUT_MS} ms; got ${timeoutMs}.`);
  }
  return timeoutMs;
}

/**
 * `apiKey` when it can travel as `Authorization: Bearer <apiKey>`: printable ASCII, no spaces.
 * Empty is a mistake, not "no key": leave the key out for that.
 */
export function checkApiKey(apiKey: string): string {
  if (typeof apiKey !== 'string') throw new TypeError(`apiKey must be a string, not ${describeValue(apiKey)}.`);
  if (!/^[\x21-\x7e]+$/.test(apiKey)) {
    throw new RangeError(
      apiKey === ''
        ? 'apiKey must not be empty; leave it out for none.'
        : 'apiKey must be printable ASCII without spaces (it travels in an Authorization header); a random hex or base64 string will do.',
    );
  }
  return apiKey;
}

/** The headers a client sends to present `apiKey`; none without one. */
export function authorization(apiKey: string | undefined): Record<string, string> {
  return apiKey === undefined ? {} : { authorization: `Bearer ${checkApiKey(apiKey)}` };
}

export function keepAliveAgent(): http.Agent {
  return new http.Agent({ keepAlive: true, maxSockets: 64, keepAliveMsecs: 1_000 });
}
