// The queue app on a real SQLite file through supertest (no listen), for the HTTP tests: a fresh
// store and app per test, both closed after it, and the contract's error body checked one way.
import { afterEach, expect } from 'vitest';
import request from 'supertest';
import { join } from 'node:path';
import { createQueueApp, openSqliteQueueStore, type Job, type QueueApp, type QueueStore } from '../../queue/index.js';
import { fakeClock } from '../helpers/clock.js';
import { parseMetrics } from '../helpers/metrics.js';
import { tempDir } from '../helpers/tmp.js';

const opened: Array<{ store: QueueStore; app: QueueApp }> = [];
afterEach(async () => {
  for (const { store, app } of opened.splice(0)) {
    app.close();
    await store.close();
  }
});

export async function appSetup() {
  const clock = fakeClock(1_000_000);
  const store = await openSqliteQueueStore({ filename: join(tempDir('leasehold-app-'), 'q.sqlite'), clock });
  // Long polls re-poll only once a minute here: a waiting claim that answers sooner was woken.
  const app = createQueueApp({ store, repollMs: 60_000 });
  opened.push({ store, app });
  const http = () => request(app);
  const enqueue = async (id: string, extra: Record<string, unknown> = {}) => {
    const res = await http()
      .post('/jobs')
      .send({ id, qty: 1, ...extra });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
  };
  const claim = async (owner: string, leaseMs = 1_000) => {
    const res = await http().post('/claims').send({ owner, leaseMs });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body.lease as { id: string; owner: string; token: number; leaseUntil: number };
  };
  const job = async (id: string): Promise<Job> => {
    const found = await store.get(id);
    if (!found) throw new Error(`job ${id} is missing`);
    return found;
  };
  return { app, http, store, clock, enqueue, claim, job };
}

/** The contract's error body: this status and code, and a sentence in `message`. */
export function expectError(res: request.Response, status: number, code: string, minMessageLength = 10): void {
  expect({ status: res.status, code: res.body?.error?.code }, JSON.stringify(res.body)).toEqual({ status, code });
  expect(typeof res.body.error.message).toBe('string');
  expect(res.body.error.message.length, 'a sentence in error.message').toBeGreaterThan(minMessageLength);
}

/**
 * Resolves once `count` long-polling claims wait, by the queue's own gauge on `GET /metrics`: a
 * test that acts "while a claim waits" must not act before it does, however slow the machine.
 */
export async function untilClaimsWait(
  http: () => request.Agent | request.SuperTest<request.Test>,
  count = 1,
): Promise<void> {
  const deadline = Date.now() + 10_000;
  let seen = 'nothing';
  while (Date.now() < deadline) {
    const waiting = parseMetrics((await http().get('/metrics')).text).value('leasehold_queue_claim_waiters');
    seen = String(waiting);
    if (waiting >= count) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`expected ${count} long-polling claim(s) waiting within 10 s; the queue's gauge said ${seen}`);
}
