// Shared setup for the receiver tests: a store on a real SQLite file in a temp dir, closed
// after each test, a plain HTTP client that reports socket errors by code, error checks, and a
// logger whose lines a test can read.
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { join } from 'node:path';
import { afterEach, expect } from 'vitest';
import type { Knex } from 'knex';
import { pino, type Logger } from 'pino';
import {
  openSqliteEffectStore,
  type EffectStore,
  type JournalEntry,
  type Totals,
  type Effect,
} from '../../receiver/index.js';
import { tempDir } from '../helpers/tmp.js';

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((close) => close()));
});

/** Runs `close` after the current test, pass or fail. */
export function closeAfterTest(close: () => Promise<void>): void {
  closers.push(close);
}

/** A migrated store on a fresh SQLite file; `filename` lets a test open a second handle on it. */
export async function sqliteStore(dir = tempDir('leasehold-receiver-')): Promise<{
  store: EffectStore<Knex.Transaction>;
  filename: string;
  openAnother(): Promise<EffectStore<Knex.Transaction>>;
}> {
  const filename = join(dir, 'receiver.sqlite');
  const openOne = async () => {
    const store = await openSqliteEffectStore({ filename, busyTimeoutMs: 200 });
    closeAfterTest(() => store.close());
    return store;
  };
  return { store: await openOne(), filename, openAnother: openOne };
}

/** A logger that keeps its JSON lines, parsed, for a test to read. */
export function capturedLogger(): { logger: Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const logger = pino(
    { level: 'info' },
    { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) },
  );
  return { logger, lines };
}

/** Polls `condition` every 5 ms; fails with `what` if it does not hold within `timeoutMs`. */
export async function until(
  what: string,
  condition: () => boolean | Promise<boolean>,
  timeoutMs = 10_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** Everything a rejected request must leave untouched. */
export interface Snapshot {
  effects: Effect[];
  totals: Totals;
  journal: JournalEntry[];
}

export async function snapshot(store: EffectStore<unknown> | EffectStore<Knex.Transaction>): Promise<Snapshot> {
  return { effects: await store.listEffects(), totals: await store.totals(), journal: await store.journal() };
}

export interface ErrorBody {
  status: number;
  body: { error?: { code?: string; message?: string } & Record<string, unknown> } & Record<string, unknown>;
}

/** Asserts status and error code together (so a failure shows both), and an actionable message. */
export function expectError(res: ErrorBody, status: number, code: string): void {
  expect({ status: res.status, code: res.body?.error?.code }, JSON.stringify(res.body)).toEqual({ status, code });
  expect(typeof res.body.error?.message, JSON.stringify(res.body)).toBe('string');
  expect(res.body.error?.message?.length ?? 0, JSON.stringify(res.body)).toBeGreaterThan(20);
}

export interface HttpResult {
  status: number;
  headers: IncomingHttpHeaders;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- a JSON answer; each test asserts the fields it reads
  body: any;
}

/**
 * One HTTP request on its own connection (no agent), so a reset of one request's socket is
 * seen as that request's error (`ECONNRESET`), never as a later request's. A body is declared
 * JSON unless `headers` say otherwise.
 */
export function send(
  url: string,
  options: { method?: string; path?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<HttpResult> {
  const declared = Object.keys(options.headers ?? {}).some((name) => name.toLowerCase() === 'content-type');
  const headers =
    options.body === undefined || declared
      ? options.headers
      : { 'content-type': 'application/json', ...options.headers };
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      new URL(options.path ?? '/', url),
      { method: options.method ?? 'GET', headers, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('error', reject);
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let body: unknown = text;
          try {
            body = text === '' ? undefined : JSON.parse(text);
          } catch {
            // Not JSON: keep the text, so the assertion shows what came back.
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body });
        });
      },
    );
    req.on('error', reject);
    if (options.body !== undefined) req.write(options.body);
    req.end();
  });
}

/** POST /effects with a Fencing-Token and a JSON body. */
export function postEffect(
  url: string,
  effect: { jobId: string; qty: number; token: number },
  headers: Record<string, string> = {},
): Promise<HttpResult> {
  return send(url, {
    method: 'POST',
    path: '/effects',
    headers: { 'content-type': 'application/json', 'fencing-token': String(effect.token), ...headers },
    body: JSON.stringify({ jobId: effect.jobId, qty: effect.qty }),
  });
}
