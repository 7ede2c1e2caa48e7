// The queue's live page through supertest: the page itself, and /ui/state with the jobs by
// status, the leases, the stale-lease refusals the app answered and each job's token history.
import { afterEach, describe, expect, test, vi } from 'vitest';
import request from 'supertest';
import { join } from 'node:path';
import { createQueueApp, openSqliteQueueStore, type QueueStore } from '../../queue/index.js';
import { QueueUi, type UiState } from '../../queue/ui.js';
import { fakeClock } from '../helpers/clock.js';
import { tempDir } from '../helpers/tmp.js';
import { newJobInput } from './store.suite.js';

const stores: QueueStore[] = [];
afterEach(async () => {
  vi.useRealTimers();
  await Promise.all(stores.splice(0).map((s) => s.close()));
});

async function setup(apiKey?: string) {
  const clock = fakeClock(1_000_000);
  const store = await openSqliteQueueStore({ filename: join(tempDir('leasehold-ui-'), 'q.sqlite'), clock });
  stores.push(store);
  const app = createQueueApp({ store, ...(apiKey ? { apiKey } : {}) });
  const auth = apiKey ? { Authorization: `Bearer ${apiKey}` } : {};
  const post = (path: string, body: object) => request(app).post(path).set(auth).send(body);
  const claim = async (owner: string) => {
    const res = await post('/claims', { owner, leaseMs: 1_000 });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body.lease as { id: string; token: number };
  };
  // Pages polling within half a second share one read: each look here is a second after the last.
  vi.useFakeTimers({ toFake: ['Date'] });
  const state = async () => {
    vi.setSystemTime(Date.now() + 1_000);
    const res = await request(app).get('/ui/state').set(auth);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body as UiState;
  };
  return { app, store, post, claim, state };
}

describe('GET /ui', () => {
  test('the page: HTML that runs only its own script and fetches only from the queue', async () => {
    const { app } = await setup();
    const res = await request(app).get('/ui');
    expect(res.status).toBe(200);
    expect(res.type).toBe('text/html');
    expect(res.text).toContain('<title>leasehold queue</title>');
    const csp = res.headers['content-security-policy'] as string;
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("connect-src 'self'");
    expect(csp).toMatch(/script-src 'sha256-[A-Za-z0-9+/]+=*'/);
    expect(res.text).not.toMatch(/<script[^>]+src=|<link\b|https?:\/\//);
  });

  test('with --api-key: the page loads without the key, its data does not', async () => {
    const { app, state } = await setup('s3cret');
    expect((await request(app).get('/ui')).status).toBe(200);
    const refused = await request(app).get('/ui/state');
    expect(refused.status).toBe(401);
    expect(refused.body.error.code).toBe('unauthorized');
    expect((await request(app).get('/ui/state').set('Authorization', 'Bearer wrong')).status).toBe(401);
    expect((await state()).stats).toEqual({ pending: 0, leased: 0, done: 0, dead: 0 });
  });
});

describe('GET /ui/state', () => {
  test('a job from pending to leased to done, a stale finish refused, and its token history', async () => {
    const { post, claim, state } = await setup();
    expect((await post('/jobs', { id: 'a', qty: 2 })).status).toBe(201);
    let s = await state();
    expect(s.stats.pending).toBe(1);
    expect(s.jobs.pending.map((j) => j.id)).toEqual(['a']);

    const first = await claim('w1');
    expect((await post('/jobs/a/release', { owner: 'w1', token: first.token })).status).toBe(200);
    const second = await claim('w2');
    s = await state();
    expect(s.jobs.leased).toEqual([expect.objectContaining({ id: 'a', owner: 'w2', token: second.token })]);

    const stale = await post('/jobs/a/finish', { owner: 'w1', token: first.token });
    expect(stale.status).toBe(409);
    expect((await post('/jobs/a/finish', { owner: 'w2', token: second.token })).status).toBe(200);

    s = await state();
    expect(s.stats).toMatchObject({ pending: 0, leased: 0, done: 1 });
    expect(s.jobs.done).toEqual([expect.objectContaining({ id: 'a', status: 'done', owner: 'w2' })]);
    expect(s.refusals).toEqual([
      expect.objectContaining({
        op: 'finish',
        job: 'a',
        presented: { owner: 'w1', token: first.token },
        reason: 'token_mismatch',
        current: expect.objectContaining({ status: 'leased', owner: 'w2', token: second.token }),
      }),
    ]);
    expect(s.tokens).toEqual([
      {
        job: 'a',
        claims: [
          expect.objectContaining({ owner: 'w1', token: first.token, attempt: 1 }),
          expect.objectContaining({ owner: 'w2', token: second.token }),
        ],
      },
    ]);
  });

  test("the gateway's coalesced lease checks: a stale answer is a refusal of `verify`", async () => {
    const { post, claim, state } = await setup();
    await post('/jobs', { id: 'b', qty: 1 });
    const lease = await claim('w1');
    const res = await post('/verifications', {
      leases: [
        { id: 'b', owner: 'w1', token: lease.token },
        { id: 'b', owner: 'w9', token: lease.token },
      ],
    });
    expect(res.status).toBe(200);
    expect((await state()).refusals).toEqual([
      expect.objectContaining({ op: 'verify', job: 'b', reason: 'owner_mismatch' }),
    ]);
  });

  test('a batch of finishes: each finished job shown done, each stale one a refusal of `finish`', async () => {
    const { post, claim, state } = await setup();
    await post('/jobs', { id: 'f1', qty: 1 });
    await post('/jobs', { id: 'f2', qty: 1 });
    const one = await claim('w1');
    const two = await claim('w1');
    const res = await post('/finishes', {
      owner: 'w1',
      finishes: [
        { id: one.id, token: one.token },
        { id: two.id, token: two.token + 1 },
      ],
    });
    expect(res.status).toBe(200);
    const s = await state();
    expect(s.jobs.done).toEqual([expect.objectContaining({ id: one.id, status: 'done', owner: 'w1' })]);
    expect(s.refusals).toEqual([expect.objectContaining({ op: 'finish', job: two.id, reason: 'token_mismatch' })]);
  });

  test('a refused heartbeat of an encoded id is recorded under the id; other errors are not refusals', async () => {
    const { post, claim, state } = await setup();
    await post('/jobs', { id: 'a/b c', qty: 1 });
    const lease = await claim('w1');
    expect((await post(`/jobs/${encodeURIComponent('a/b c')}/heartbeat`, { owner: 'w1', token: 99 })).status).toBe(409);
    expect((await post('/jobs/nope/finish', { owner: 'w1', token: 1 })).status).toBe(404);
    expect((await post('/jobs/a/finish', { owner: 'w1' })).status).toBe(400);
    expect((await state()).refusals).toEqual([
      expect.objectContaining({ op: 'heartbeat', job: 'a/b c', presented: { owner: 'w1', token: 99 } }),
    ]);
    expect(lease.token).toBe(1);
  });
});

describe('QueueUi', () => {
  async function ui(options: { refusalsKept?: number; claimsKept?: number; shareMs?: number } = {}) {
    const { store } = await setup();
    let now = 5_000;
    return { store, ui: new QueueUi({ store, clock: { now: () => now }, ...options }), tick: () => (now += 1_000) };
  }

  test('keeps only the latest refusals and claims, newest first', async () => {
    const { ui: page, store } = await ui({ refusalsKept: 3, claimsKept: 4, shareMs: 0 });
    for (let i = 1; i <= 5; i += 1) {
      await store.enqueue(newJobInput({ id: `j${i}` }));
      const lease = (await store.claim('w1', 1_000))!;
      page.claimed(lease);
      await store.finish(lease.id, { owner: 'w1', token: 7 }, null).catch((err: unknown) => {
        page.refused('finish', lease.id, err);
      });
    }
    const s = await page.state();
    expect(s.refusals.map((r) => r.job)).toEqual(['j5', 'j4', 'j3']);
    expect(s.tokens.map((t) => t.job)).toEqual(['j5', 'j4', 'j3', 'j2']);
  });

  test('pages polling at once share one read of the store', async () => {
    const { ui: page, store, tick } = await ui({ shareMs: 500 });
    let reads = 0;
    const stats = store.stats.bind(store);
    store.stats = () => {
      reads += 1;
      return stats();
    };
    await Promise.all([page.state(), page.state(), page.state()]);
    expect(reads).toBe(1);
    tick();
    await page.state();
    expect(reads).toBe(2);
  });
});
