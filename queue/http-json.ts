// JSON over HTTP/1.1 on a keep-alive agent: one connection pool per client, no per-request
// connection setup, and a timeout that covers the whole exchange.
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
  timeoutMs: number;
  agent: http.Agent;
  signal?: AbortSignal | undefined;
}

export class HttpTimeoutError extends Error {
  override readonly name = 'HttpTimeoutError';
}

export function requestJson(req: JsonRequest): Promise<JsonResponse> {
  const payload = req.json === undefined ? undefined : Buffer.from(req.json);
  return new Promise((resolve, reject) => {
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
        ...(req.signal ? { signal: req.signal } : {}),
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('error', reject);
        res.on('end', () => {
          clearTimeout(timer);
          const text = Buffer.concat(chunks).toString('utf8');
          let body: unknown = undefined;
          if (text.length > 0) {
            try {
              body = JSON.parse(text);
            } catch {
              body = text;
            }
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body });
        });
      },
    );
    const timer = setTimeout(() => {
      outgoing.destroy(new HttpTimeoutError(`no answer from ${req.url.origin} within ${req.timeoutMs} ms`));
    }, req.timeoutMs);
    outgoing.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    outgoing.end(payload);
  });
}

export function keepAliveAgent(): http.Agent {
  return new http.Agent({ keepAlive: true, maxSockets: 64, keepAliveMsecs: 1_000 });
}
