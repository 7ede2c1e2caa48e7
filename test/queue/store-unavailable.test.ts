// A database that stays busy or unreachable: the store itself rejects with `queue_unavailable`
// (the driver's error kept as `cause`) and changes nothing; the HTTP app only renders it.
import { describe, expect, onTestFinished, test } from 'vitest';
import { join } from 'node:path';
import { openSqliteQueueStore, QueueError, type QueueStore } from '../../queue/index.js';
import { KnexQueueStore } from '../../queue/knex-store.js';
import { postgresDialect } from '../../queue/postgres-store.js';
import { openPostgres, parsePostgresUrl } from '../../platform/postgres.js';
import { isBusyError } from '../../platform/sqlite.js';
import { holdWriteLock } from '../helpers/sqlite-lock.js';
import { tempDir } from '../helpers/tmp.js';
import { newJobInput, rejection } from './store.suite.js';

/** Nothing listens on port 1: every query fails with ECONNREFUSED, as when the server is down. */
const UNREACHABLE = 'postgres://postgres@127.0.0.1:1/test';

const SQLITE_BUSY_MESSAGE =
  'The database stayed locked by other processes for longer than the retry budget. Retry the request.';
const POSTGRES_MESSAGE =
  'The PostgreSQL database could not be reached, or kept conflicting for longer than the retry budget. Retry the request.';

/** A store on a fresh file that gives up on a held lock after about 150 ms. */
async function impatientSqliteStore(): Promise<{ store: QueueStore; filename: string }> {
  const filename = join(tempDir('leasehold-unavailable-'), 'queue.sqlite');
  const store = await openSqliteQueueStore({ filename, busyTimeoutMs: 20, busyBudgetMs: 150 });
  onTestFinished(() => store.close());
  return { store, filename };
}

describe('queue store: SQLite that stays locked', () => {
  test('a write that outlasts the busy budget is queue_unavailable, with SQLITE_BUSY as its cause, and changes nothing', async () => {
    const { store, filename } = await impatientSqliteStore();
    await store.enqueue(newJobInput({ id: 'a' }));
    const release = await holdWriteLock(filename);

    const error = await rejection(store.enqueue(newJobInput({ id: 'b' })), 'queue_unavailable');
    expect(error.status).toBe(503);
    expect(error.message).toBe(SQLITE_BUSY_MESSAGE);
    expect(isBusyError(error.cause), `expected SQLITE_BUSY as the cause, got ${String(error.cause)}`).toBe(true);
    expect(error.toJSON(), 'the body carries code and message only').toEqual({
      error: { code: 'queue_unavailable', message: SQLITE_BUSY_MESSAGE },
    });
    await rejection(store.claim('w1', 60_000), 'queue_unavailable');

    await release();
    expect(await store.get('b'), 'the refused enqueue left no job').toBeNull();
    expect(await store.get('a')).toMatchObject({ status: 'pending', token: 0, attempts: 0 });
    expect(await store.stats()).toEqual({ pending: 1, leased: 0, done: 0, dead: 0 });
  });

  test('writes waiting in a group commit each get queue_unavailable, and none of them is applied', async () => {
    const { store, filename } = await impatientSqliteStore();
    await store.enqueue(newJobInput({ id: 'a' }));
    const lease = await store.claim('w1', 60_000);
    if (!lease) throw new Error('expected w1 to claim job "a"');
    const release = await holdWriteLock(filename);

    // Submitted together: the first runs alone, the others wait for it and share the next transaction.
    const outcomes = await Promise.allSettled([
      store.enqueue(newJobInput({ id: 'b' })),
      store.enqueue(newJobInput({ id: 'c' })),
      store.heartbeat('a', lease, 120_000),
      store.finish('a', lease, { ok: true }),
      store.claim('w2', 60_000),
    ]);
    const seen = outcomes.map((outcome) =>
      outcome.status === 'rejected' && outcome.reason instanceof QueueError
        ? outcome.reason.code
        : `${outcome.status}: ${String(outcome.status === 'rejected' ? outcome.reason : JSON.stringify(outcome.value))}`,
    );
    expect(seen).toEqual(Array(5).fill('queue_unavailable'));

    await release();
    expect(await store.get('a'), 'job "a" is still leased as before').toMatchObject({
      status: 'leased',
      owner: 'w1',
      token: lease.token,
      leaseUntil: lease.leaseUntil,
    });
    expect(await store.stats()).toEqual({ pending: 0, leased: 1, done: 0, dead: 0 });
    expect((await store.finish('a', lease, null)).status, 'the store writes again once the lock is gone').toBe('done');
  });

  test('a refusal stays a refusal, even when its message reads like a driver error', async () => {
    const { store } = await impatientSqliteStore();
    const id = 'SQLITE_BUSY: database is locked';
    await store.enqueue(newJobInput({ id }));
    const lease = await store.claim('w1', 60_000);
    if (!lease) throw new Error(`expected w1 to claim job "${id}"`);
    const error = await rejection(store.finish(id, { owner: 'w1', token: lease.token + 1 }, null), 'stale_lease');
    expect(error.message).toContain(id);
    await rejection(store.verify(id, { owner: 'w2', token: lease.token }), 'stale_lease');
  });
});

describe('queue store: PostgreSQL that cannot be reached', () => {
  test('writes and reads are queue_unavailable, with the driver error as their cause', async () => {
    const store = new KnexQueueStore(
      openPostgres(parsePostgresUrl(UNREACHABLE)),
      postgresDialect({ schema: undefined, retryBudgetMs: 100 }),
    );
    onTestFinished(() => store.close());

    const error = await rejection(store.claim('w1', 60_000), 'queue_unavailable');
    expect(error.status).toBe(503);
    expect(error.message).toBe(POSTGRES_MESSAGE);
    expect(error.cause).toMatchObject({ code: 'ECONNREFUSED' });
    expect(error.toJSON()).toEqual({ error: { code: 'queue_unavailable', message: POSTGRES_MESSAGE } });
    await rejection(store.enqueue(newJobInput({ id: 'a' })), 'queue_unavailable');
    await rejection(store.verify('a', { owner: 'w1', token: 1 }), 'queue_unavailable');
    await rejection(store.get('a'), 'queue_unavailable');
    await rejection(store.list({ limit: 10 }), 'queue_unavailable');
    await rejection(store.stats(), 'queue_unavailable');
  });
});
