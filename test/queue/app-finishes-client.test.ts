// QueueClient.finishMany against a real queue on 127.0.0.1: per-finish refusals come back as the
// QueueError the single finish would throw (returned, not thrown), a bad request throws, and a
// batch whose answer was lost is safe to send again.
import { join } from 'node:path';
import { afterEach, expect, test } from 'vitest';
import { listen } from '../../platform/listen.js';
import {
  createQueueApp,
  openSqliteQueueStore,
  QueueClient,
  QueueError,
  type Job,
  type QueueStore,
} from '../../queue/index.js';
import { tempDir } from '../helpers/tmp.js';

const closers: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

/**
 * A queue on a real file and a real port. `hold` set, a batched finish answers only once the
 * test lets it go: the transaction has committed, the answer not yet sent.
 */
async function setup(hold?: { committed: () => void; release: Promise<void> }) {
  const real = await openSqliteQueueStore({ filename: join(tempDir('leasehold-finishes-client-'), 'q.sqlite') });
  closers.push(() => real.close());
  const store: QueueStore = hold
    ? new Proxy(real, {
        get(target, property) {
          if (property === 'finishMany')
            return async (...args: Parameters<QueueStore['finishMany']>) => {
              const answer = await target.finishMany(...args);
              hold.committed();
              await hold.release;
              return answer;
            };
          const value = Reflect.get(target, property) as unknown;
          return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
        },
      })
    : real;
  const app = createQueueApp({ store });
  closers.push(() => app.close());
  const server = await listen(app, '127.0.0.1', 0);
  closers.push(() => server.close());
  const client = new QueueClient(server.url);
  closers.push(() => client.close());
  return { client, store: real };
}

async function thrown(promise: Promise<unknown>): Promise<QueueError> {
  const err = await promise.then(
    (value) => {
      throw new Error(`expected a QueueError, got ${JSON.stringify(value)}`);
    },
    (error: unknown) => error,
  );
  expect(err).toBeInstanceOf(QueueError);
  return err as QueueError;
}

test('results in order: jobs, and refusals as the QueueError the single finish throws; next when asked', async () => {
  const { client } = await setup();
  for (const id of ['a', 'b', 'c']) await client.enqueue({ id, qty: 1 });
  const [a, b] = await client.claimMany('w1', { max: 2, leaseMs: 5_000 });
  const { results, next } = await client.finishMany(
    'w1',
    [
      { id: a!.id, token: a!.token, result: { n: 1 } },
      { id: b!.id, token: b!.token + 1 },
      { id: 'ghost', token: 1 },
    ],
    { next: true },
  );
  expect(results[0]).toMatchObject({ id: 'a', status: 'done', result: { n: 1 } });
  expect(next.map((l) => [l.id, l.owner])).toEqual([['c', 'w1']]);
  for (const [i, id, token] of [
    [1, 'b', b!.token + 1],
    [2, 'ghost', 1],
  ] as const) {
    const single = await thrown(client.finish(id, { owner: 'w1', token }));
    const batched = results[i];
    expect(batched).toBeInstanceOf(QueueError);
    const { code, status, message, details } = batched as QueueError;
    expect({ code, status, message, details }).toEqual({
      code: single.code,
      status: single.status,
      message: single.message,
      details: single.details,
    });
  }
  expect((results[1] as QueueError).details).toMatchObject({ reason: 'token_mismatch' });
  expect((results[2] as QueueError).code).toBe('unknown_job');
  expect((await client.finishMany('w1', [{ id: 'c', token: 1 }])).next, 'next only when asked').toEqual([]);
});

test('a refusal of the whole request throws invalid_request', async () => {
  const { client } = await setup();
  const err = await thrown(
    client.finishMany('w1', [
      { id: 'a', token: 1 },
      { id: 'a', token: 1 },
    ]),
  );
  expect({ code: err.code, status: err.status }).toEqual({ code: 'invalid_request', status: 400 });
});

test('an answer lost after the batch landed: the retry shows each job done by the same owner and token', async () => {
  let committed!: () => void;
  const landed = new Promise<void>((resolve) => (committed = resolve));
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  const { client, store } = await setup({ committed: () => committed(), release: held });
  for (const id of ['a', 'b']) await client.enqueue({ id, qty: 1 });
  const leases = await client.claimMany('w1', { max: 2, leaseMs: 60_000 });
  const finishes = leases.map((l) => ({ id: l.id, token: l.token, result: 'r' }));
  const abort = new AbortController();
  const lost = client.finishMany('w1', finishes, { signal: abort.signal }).catch((err: unknown) => err);
  await landed;
  abort.abort(new Error('gave up waiting'));
  expect(String(await lost)).toContain('gave up waiting');
  release();
  expect((await Promise.all(finishes.map((f) => store.get(f.id)))).map((job) => job?.status)).toEqual(['done', 'done']);

  const retry = await client.finishMany('w1', finishes, { next: true });
  expect(retry.next).toEqual([]);
  const seen = retry.results.map((result) => {
    if (!(result instanceof QueueError)) return { unexpected: (result as Job).status };
    const { reason, expected, current } = result.details as Record<string, unknown>;
    return { code: result.code, reason, expected, current, finishedByMe: result.message.includes('already finished') };
  });
  expect(seen).toEqual(
    leases.map((l) => ({
      code: 'stale_lease',
      reason: 'not_leased',
      expected: { owner: 'w1', token: l.token },
      current: { status: 'done', owner: 'w1', token: l.token, leaseUntil: l.leaseUntil },
      finishedByMe: true,
    })),
  );
});
