// JSON over HTTP/1.1 on a keep-alive agent: one connection pool per client, no per-request
// connection setup, a timeout that covers the whole exchange, and cancellation by AbortSignal.
import http from 'node:http';

export interface JsonResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: unknown;
}

export interface JsonRequest {
  method: 'GET' | 'POST';
  url: URL;
  /** The body, already serialised: a value that cannot be JSON is the caller's error, not the network's. */
  json?: string | undefined;
  headers?: Record<string, string>;
  /** Covers the whole exchange, from connecting to the last byte of the answer. */
  timeoutMs: number;
  agent: http.Agent;
  /** Aborting it ends the exchange at once with HttpAbortError; already aborted, nothing is sent. */
  signal?: AbortSignal | undefined;
}

export class HttpTimeoutError extends Error {
  override readonly name = 'HttpTimeoutError';
}

/** The caller's signal ended the exchange: not a network failure, so callers can tell it apart. */
export class HttpAbortError extends Error {
  override readonly name = 'HttpAbortError';
}

/**
 * Settles exactly once. Whatever the outcome, the timer is cleared and the abort listener
 * removed, so one long-lived signal can serve any number of sequential requests. A timeout or
 * an abort destroys the request's socket: the agent must not hand a connection with an answer
 * still on its way to the next request.
 */
export function requestJson(req: JsonRequest): Promise<JsonResponse> {
  const payload = req.json === undefined ? undefined : Buffer.from(req.json);
  return new Promise((resolve, reject) => {
    if (req.signal?.aborted) {
      reject(new HttpAbortError(`aborted before the request to ${req.url.origin} was sent`));
      return;
    }
    let settled = false;
    const settle = (outcome: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      req.signal?.removeEventListener('abort', onAbort);
      outcome();
    };
    const fail = (err: unknown) => settle(() => reject(err));
    // The socket error that destroying the request causes comes later and is ignored: the first cause wins.
    const end = (err: Error) => {
      fail(err);
      outgoing.destroy(err);
    };

    const outgoing = http.request(
      req.url,
      {
        method: req.method,
        agent: req.agent,
        headers: {
          accept: 'application/json',
          ...(payload ? { 'content-type': 'application/json', 'content-length': String(payload.length) } : {}),
          ...req.headers,
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('error', fail);
        res.on('end', () => {
          settle(() => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: parseBody(chunks) }));
        });
        // Closed before the last byte without an error of its own: the answer was cut.
        res.on('close', () => {
          if (!res.complete) fail(Object.assign(new Error('the connection closed mid-answer'), { code: 'ECONNRESET' }));
        });
      },
    );
    outgoing.on('error', fail);
    const timer = setTimeout(() => {
      end(new HttpTimeoutError(`no answer from ${req.url.origin} within ${req.timeoutMs} ms`));
    }, req.timeoutMs);
    const onAbort = () => end(new HttpAbortError(`the request to ${req.url.origin} was aborted`));
    req.signal?.addEventListener('abort', onAbort, { once: true });
    outgoing.end(payload);
  });
}

/** An answer's body: JSON when it parses, else the text as is (an error page, say); undefined when empty. */
export function parseBody(chunks: Buffer[]): unknown {
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.length === 0) return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

export function keepAliveAgent(): http.Agent {
  return new http.Agent({ keepAlive: true, maxSockets: 64, keepAliveMsecs: 1_000 });
}
