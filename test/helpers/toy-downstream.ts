// A fenced downstream written for the tests on node:http, in memory: it keeps the fencing
// protocol (record each (jobId, key) once, fence per job across keys, compare qty and body, check
// signatures), and records every request it gets. Each `breaks` option switches one rule off, so
// the conformance suite can be shown to catch that break, and only that one.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { isDeepStrictEqual } from 'node:util';
import { afterEach } from 'vitest';
import { FENCING_TOKEN_HEADER, SIGNATURE_HEADER, verifySignature } from '../../receiver/signature.js';

export interface ToyDownstreamOptions {
  /** The effect endpoint's path (default `/effects`). */
  path?: string;
  /** Signed requests only, with this secret. */
  secret?: string;
  /**
   * One rule off: `tokens` (never fences), `race` (checks, waits, then records: two racing
   * requests both apply), `signatures` (accepts any), `conflict-first` (compares qty and body
   * before the fence: a lower token with a changed effect is a conflict), `conflict-raises` (a
   * conflict raises the job's highest token), `duplicate-restamped` (a duplicate answers the
   * effect with the repeat's token, not as first recorded).
   */
  breaks?: 'tokens' | 'race' | 'signatures' | 'conflict-first' | 'conflict-raises' | 'duplicate-restamped';
  /** Waits this long before answering each request; a function is given the request's number, from 1. */
  delayMs?: number | ((request: number) => number);
}

export interface ReceivedRequest {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: unknown;
  status: number;
}

export interface RecordedToyEffect {
  jobId: string;
  key: string | null;
  qty: number | null;
  body?: unknown;
  token: number;
  appliedAt: number;
}

export interface ToyDownstream {
  /** The effect endpoint: `http://127.0.0.1:<port><path>`. */
  url: string;
  /** Every request, in the order they were answered. */
  requests: ReceivedRequest[];
  /** Every effect applied, in order; under the `race` break the same key can appear twice. */
  applied: RecordedToyEffect[];
  close(): Promise<void>;
}

const servers: ToyDownstream[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) await server.close();
});

/** Starts a downstream on a free port; closed after the test. */
export async function toyDownstream(options: ToyDownstreamOptions = {}): Promise<ToyDownstream> {
  const path = options.path ?? '/effects';
  const requests: ReceivedRequest[] = [];
  const applied: RecordedToyEffect[] = [];
  const highest = new Map<string, number>();
  const effects = new Map<string, RecordedToyEffect>();

  let received = 0;
  const server = http.createServer((req, res) => {
    const delayMs = typeof options.delayMs === 'function' ? options.delayMs(++received) : options.delayMs;
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      void answer(req, raw).then(async ({ status, body, replayed }) => {
        if (delayMs) await new Promise((r) => setTimeout(r, delayMs));
        let parsed: unknown;
        try {
          parsed = JSON.parse(raw.toString('utf8'));
        } catch {
          parsed = raw.toString('utf8');
        }
        requests.push({ path: req.url ?? '', headers: req.headers, body: parsed, status });
        res.writeHead(status, {
          'content-type': 'application/json',
          ...(replayed ? { 'idempotent-replayed': 'true' } : {}),
        });
        res.end(JSON.stringify(body));
      });
    });
  });

  const error = (status: number, code: string, message: string, details: object = {}) => ({
    status,
    body: { error: { code, message, ...details } },
  });

  async function answer(
    req: http.IncomingMessage,
    raw: Buffer,
  ): Promise<{ status: number; body: unknown; replayed?: boolean }> {
    if (req.method !== 'POST' || req.url !== path) return error(404, 'not_found', `No route ${req.method} ${req.url}.`);
    const tokenText = req.headers[FENCING_TOKEN_HEADER];
    const token = typeof tokenText === 'string' && /^\d{1,15}$/.test(tokenText) ? Number(tokenText) : NaN;
    if (!(token >= 1)) return error(400, 'invalid_request', 'Fencing-Token must be an integer >= 1.');
    if (options.secret !== undefined && options.breaks !== 'signatures') {
      const header = req.headers[SIGNATURE_HEADER];
      const check = verifySignature(
        options.secret,
        typeof header === 'string' ? header : undefined,
        { method: 'POST', path: req.url, token, body: raw },
        Date.now(),
      );
      if (!check.ok) return error(401, 'invalid_signature', check.reason);
    }
    let input: { jobId?: unknown; key?: unknown; qty?: unknown; body?: unknown };
    try {
      input = JSON.parse(raw.toString('utf8')) as typeof input;
    } catch {
      return error(400, 'invalid_request', 'The body is not JSON.');
    }
    const problem = inputProblem(input);
    if (problem) return error(400, 'invalid_request', problem);
    const jobId = input.jobId as string;
    const key = (input.key as string | undefined) ?? null;
    const qty = (input.qty as number | undefined) ?? null;
    const id = JSON.stringify([jobId, key]);

    const fenced = () => {
      const top = highest.get(jobId) ?? 0;
      return options.breaks !== 'tokens' && token < top
        ? error(409, 'fenced', `Token ${token} is lower than ${top}.`, { highestToken: top })
        : undefined;
    };
    const recorded = effects.get(id);
    const differs = (effect: RecordedToyEffect) =>
      effect.qty !== qty || !isDeepStrictEqual(canonical(effect.body), canonical(input.body));
    if (options.breaks === 'conflict-first' && recorded && differs(recorded)) {
      return error(422, 'conflict', 'Another qty or body for a recorded effect.', { effect: recorded });
    }
    const refused = fenced();
    if (refused) return refused;
    if (options.breaks === 'race') {
      // The check and the write are apart, long enough on a loaded machine for the requests sent
      // with this one to arrive in between: each of them finds nothing recorded and applies too.
      await new Promise((r) => setTimeout(r, 300));
    }
    if (recorded) {
      if (differs(recorded)) {
        if (options.breaks === 'conflict-raises') highest.set(jobId, Math.max(highest.get(jobId) ?? 0, token));
        return error(422, 'conflict', 'Another qty or body for a recorded effect.', { effect: recorded });
      }
      highest.set(jobId, Math.max(highest.get(jobId) ?? 0, token));
      const answered = options.breaks === 'duplicate-restamped' ? { ...recorded, token } : recorded;
      return { status: 200, body: { outcome: 'duplicate', effect: answered }, replayed: true };
    }
    const effect: RecordedToyEffect = {
      jobId,
      key,
      qty,
      ...(input.body !== undefined ? { body: input.body } : {}),
      token,
      appliedAt: Date.now(),
    };
    effects.set(id, effect);
    applied.push(effect);
    highest.set(jobId, Math.max(highest.get(jobId) ?? 0, token));
    return { status: 201, body: { outcome: 'applied', effect } };
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const handle: ToyDownstream = {
    url: `http://127.0.0.1:${port}${path}`,
    requests,
    applied,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  servers.push(handle);
  return handle;
}

function inputProblem(input: unknown): string | undefined {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) return 'The body must be a JSON object.';
  const { jobId, key, qty, body, ...rest } = input as Record<string, unknown>;
  if (Object.keys(rest).length > 0) return `Unknown fields: ${Object.keys(rest).join(', ')}.`;
  if (typeof jobId !== 'string' || jobId.length < 1 || jobId.length > 256) return 'jobId must be 1-256 characters.';
  if (key !== undefined && (typeof key !== 'string' || key.length < 1 || key.length > 128))
    return 'key must be 1-128 characters.';
  if (qty !== undefined && !(Number.isSafeInteger(qty) && (qty as number) >= 1)) return 'qty must be an integer >= 1.';
  if (qty === undefined && body === undefined) return 'qty is required unless a body is given.';
  if (body !== undefined && Buffer.byteLength(JSON.stringify(body)) > 64 * 1024) return 'body is over 64 KiB.';
  return undefined;
}

/** JSON with object keys sorted, so key order does not count. */
function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.keys(value)
      .sort()
      .map((k) => [k, canonical((value as Record<string, unknown>)[k])]),
  );
}
