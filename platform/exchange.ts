// JSON over HTTP/1.1 on a keep-alive agent: one connection pool per client, no per-request
// connection setup, a timeout that covers the whole exchange, and cancellation by AbortSignal.
// One exchange is reported as a value instead of thrown: a response, or exactly which way it
// failed (timeout, reset, refused, other network error, aborted). The gateway's retry rules
// need that distinction, and the queue's client tells an abort from an unreachable queue by it.
import http from 'node:http';

export type Exchange =
  | { kind: 'response'; status: number; headers: http.IncomingHttpHeaders; body: unknown }
  /** No complete answer within `timeoutMs`: the request may or may not have been processed. */
  | { kind: 'timeout'; timeoutMs: number }
  /** The connection broke after it was made (ECONNRESET, EPIPE, cut mid-answer). */
  | { kind: 'reset'; code: string; message: string }
  /** Nobody listens there (ECONNREFUSED): the request never reached a server. */
  | { kind: 'refused'; code: string; message: string }
  /** Any other socket-level failure (DNS, unreachable host...). */
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
}

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
          ...req.headers,
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('error', fail);
        res.on('end', () => {
          settle({ kind: 'response', status: res.statusCode ?? 0, headers: res.headers, body: parseBody(chunks) });
        });
        // Closed before the last byte: the answer was cut, which is a reset whatever Node reports.
        res.on('close', () => {
          if (!res.complete) fail(Object.assign(new Error('the connection closed mid-answer'), { code: 'ECONNRESET' }));
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

export function keepAliveAgent(): http.Agent {
  return new http.Agent({ keepAlive: true, maxSockets: 64, keepAliveMsecs: 1_000 });
}
