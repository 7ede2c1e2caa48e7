// POST /finishes over HTTP (supertest on the app, a real SQLite file): each finish answered as
// its own POST /jobs/:id/finish would have been, its status inside its error; `next` only when
// asked; a bad request refused whole, changing nothing; each finish counted and logged.
import { join } from 'node:path';
import { pino } from 'pino';
import request from 'supertest';
import { afterEach, describe, expect, test } from 'vitest';
import { createQueueApp, openSqliteQueueStore, type Job, type QueueApp, type QueueStore } from '../../queue/index.js';
import { fakeClock } from '../helpers/clock.js';
import { parseMetrics } from '../helpers/metrics.js';
import { tempDir } from '../helpers/tmp.js';
import { expectError } from './app-setup.js';

type Line = Record<string, unknown>;

const closers: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

async function setup() {
  const clock = fakeClock(1_000_000);
  const store: QueueStore = await openSqliteQueueStore({
    filename: join(tempDir('leasehold-finishes-'), 'q.sqlite'),
    clock,
  });
  closers.push(() => store.close());
  const lines: Line[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as Line) });
  const app: QueueApp = createQueueApp({ store, logger, repollMs: 60_000 });
  closers.push(() => app.close());
  const http = () => request(app);
  const enqueue = async (...ids: string[]) => {
    for (const id of ids) expect((await http().post('/jobs').send({ id, qty: 1 })).status).toBe(201);
  };
  const claim = async (owner: string, max: number, leaseMs = 1_000) => {
    const res = await http().post('/claims').send({ owner, leaseMs, max });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body.leases as Array<{ id: string; owner: string; token: number; leaseUntil: number }>;
  };
  const rows = async () => (await store.list({ limit: 1_000 })) as Job[];
  return { http, store, clock, lines, enqueue, claim, rows };
}

describe('POST /finishes', () => {
  test('each answer is the job, or the error body and status its own finish would have given', async () => {
    const { http, enqueue, claim } = await setup();
    await enqueue('a', 'b', 'c');
    const [a, b] = await claim('w1', 2);
    const res = await http()
      .post('/finishes')
      .send({
        owner: 'w1',
        finishes: [
          { id: a!.id, token: a!.token, result: { ok: 1 } },
          { id: b!.id, token: b!.token + 1 },
          { id: 'ghost', token: 1 },
        ],
      });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(Object.keys(res.body), 'no next unless asked').toEqual(['results']);
    expect(res.body.results[0]).toEqual({
      job: expect.objectContaining({ id: 'a', status: 'done', result: { ok: 1 } }),
    });
    // Nothing changed for b and ghost: their own finishes now answer what the batch said.
    const single = async (id: string, token: number) => {
      const one = await http().post(`/jobs/${id}/finish`).send({ owner: 'w1', token });
      return { error: { ...one.body.error, status: one.status } };
    };
    expect(res.body.results[1]).toEqual(await single('b', b!.token + 1));
    expect(res.body.results[1].error).toMatchObject({ code: 'stale_lease', status: 409, reason: 'token_mismatch' });
    expect(res.body.results[2]).toEqual(await single('ghost', 1));
    expect(res.body.results[2].error).toMatchObject({ code: 'unknown_job', status: 404 });
  });

  test('next: true gives at most one lease per accepted finish, for the same owner; all refused gives none', async () => {
    const { http, clock, enqueue, claim } = await setup();
    await enqueue('h1', 'h2', 'w-1', 'w-2', 'w-3');
    const held = await claim('w1', 2, 2_000);
    const finishes = held.map((l) => ({ id: l.id, token: l.token }));
    const refused = await http()
      .post('/finishes')
      .send({ owner: 'w1', finishes: finishes.map((f) => ({ ...f, token: f.token + 1 })), next: true });
    expect(refused.status).toBe(200);
    expect(refused.body.next).toEqual([]);
    clock.advance(5);
    const res = await http().post('/finishes').send({ owner: 'w1', finishes, next: true });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(
      res.body.next.map((l: { id: string; owner: string; leaseUntil: number }) => [l.id, l.owner, l.leaseUntil]),
    ).toEqual([
      ['w-1', 'w1', clock.now() + 2_000],
      ['w-2', 'w1', clock.now() + 2_000],
    ]);
    const withLease = await http()
      .post('/finishes')
      .send({
        owner: 'w1',
        finishes: res.body.next.map((l: { id: string; token: number }) => ({ id: l.id, token: l.token })),
        next: { leaseMs: 300 },
      });
    expect(withLease.body.next.map((l: { id: string; leaseUntil: number }) => [l.id, l.leaseUntil])).toEqual([
      ['w-3', clock.now() + 300],
    ]);
  });

  test.each([
    ['no owner', { finishes: [{ id: 'a', token: 1 }] }],
    ['no finishes', { owner: 'w1', finishes: [] }],
    ['101 finishes', { owner: 'w1', finishes: Array.from({ length: 101 }, (_, i) => ({ id: `j${i}`, token: 1 })) }],
    [
      'the same id twice',
      {
        owner: 'w1',
        finishes: [
          { id: 'a', token: 1 },
          { id: 'b', token: 1 },
          { id: 'a', token: 1 },
        ],
      },
    ],
    ['a token of 0', { owner: 'w1', finishes: [{ id: 'a', token: 0 }] }],
    ['a fractional token', { owner: 'w1', finishes: [{ id: 'a', token: 1.5 }] }],
    ['an empty id', { owner: 'w1', finishes: [{ id: '', token: 1 }] }],
    ['a leaseMs of 0', { owner: 'w1', finishes: [{ id: 'a', token: 1 }], next: { leaseMs: 0 } }],
    ['an unknown field', { owner: 'w1', finishes: [{ id: 'a', token: 1, tokn: 2 }] }],
  ])('%s is 400 invalid_request and nothing changes', async (_name, body) => {
    const { http, enqueue, claim, rows } = await setup();
    await enqueue('a', 'b', 'spare');
    await claim('w1', 2);
    const before = await rows();
    const res = await http().post('/finishes').send(body);
    expectError(res, 400, 'invalid_request');
    expect(await rows()).toEqual(before);
  });

  test('a duplicate id is named in the message', async () => {
    const { http } = await setup();
    const res = await http()
      .post('/finishes')
      .send({
        owner: 'w1',
        finishes: [
          { id: 'a', token: 1 },
          { id: 'a', token: 2 },
        ],
      });
    expectError(res, 400, 'invalid_request');
    expect(res.body.error.message).toContain('"a" appears again');
  });

  test('each finish and each refusal counted as the single route counts them; one log line per finished job', async () => {
    const { http, clock, lines, enqueue, claim } = await setup();
    await enqueue('a', 'b', 'c', 'n');
    const [a, b, c] = await claim('w1', 3, 1_000);
    clock.advance(400);
    lines.length = 0;
    const res = await http()
      .post('/finishes')
      .send({
        owner: 'w1',
        finishes: [
          { id: a!.id, token: a!.token },
          { id: b!.id, token: b!.token },
          { id: c!.id, token: c!.token + 1 },
        ],
        next: true,
      });
    expect(res.status).toBe(200);
    const scraped = parseMetrics((await http().get('/metrics')).text);
    expect({
      finishes: scraped.value('leasehold_queue_finishes_total'),
      leaseLeft: scraped.value('leasehold_queue_finish_lease_left_ms_sum'),
      refusals: scraped.value('leasehold_queue_stale_lease_refusals_total', { op: 'finish', reason: 'token_mismatch' }),
      claims: scraped.value('leasehold_queue_claims_total'),
    }).toEqual({ finishes: 2, leaseLeft: 1_200, refusals: 1, claims: 3 + 1 });
    const logged = lines
      .filter((line) => line.msg === 'finished' || line.msg === 'claimed')
      .map(({ msg, jobId, owner, token }) => ({ msg, jobId, owner, token }));
    expect(logged).toEqual([
      { msg: 'finished', jobId: 'a', owner: 'w1', token: a!.token },
      { msg: 'finished', jobId: 'b', owner: 'w1', token: b!.token },
      { msg: 'claimed', jobId: 'n', owner: 'w1', token: 1 },
    ]);
  });
});
