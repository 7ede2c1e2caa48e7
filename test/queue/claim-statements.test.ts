// What a claim costs in statements, each a round trip (to libuv's thread pool on SQLite, to the
// server on PostgreSQL): pinned here, so a change that adds one is seen. SQLite: the sweep and one
// UPDATE in the BEGIN IMMEDIATE transaction, a finish-and-claim one UPDATE more (the sweep is
// once per transaction, shared by a group commit's claims). PostgreSQL: the claim is
// one statement, its own transaction, reading the server's clock itself; a finish-and-claim locks
// the row and reads the clock in one statement; an enqueue NOTIFYs in its INSERT; and each of
// those statements is a prepared one, planned once per connection.
import { afterEach, describe, expect, test } from 'vitest';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { openPostgresQueueStore, openSqliteQueueStore } from '../../queue/index.js';
import type { KnexQueueStore } from '../../queue/knex-store.js';
import { testSchema } from '../helpers/postgres.js';
import { tempDir } from '../helpers/tmp.js';
import { newJobInput } from './store.suite.js';

const stores: KnexQueueStore[] = [];
afterEach(async () => {
  await Promise.all(stores.splice(0).map((s) => s.close()));
});

/** Every statement `pg` sends while `work` runs, by its first two words, `prepared` when named. */
async function pgStatements(work: () => Promise<unknown>): Promise<string[]> {
  const pg = createRequire(import.meta.url)('pg') as { Client: { prototype: { query: (...a: unknown[]) => unknown } } };
  const original = pg.Client.prototype.query;
  const sent: string[] = [];
  pg.Client.prototype.query = function (this: unknown, ...args: unknown[]) {
    const first = args[0] as string | { text?: string; name?: string } | undefined;
    const words = firstWords(typeof first === 'string' ? first : (first?.text ?? ''));
    sent.push(typeof first === 'object' && first.name ? `prepared ${words}` : words);
    return original.apply(this, args);
  };
  try {
    await work();
  } finally {
    pg.Client.prototype.query = original;
  }
  return sent;
}

/** Every statement SQLite receives while `work` runs, by its first two words (or as `shown`). */
async function sqliteStatements(
  store: KnexQueueStore,
  work: () => Promise<unknown>,
  shown: (sql: string) => string = firstWords,
): Promise<string[]> {
  const sent: string[] = [];
  const listener = (q: { sql: string }) => sent.push(shown(q.sql));
  store.knex.on('query', listener);
  try {
    await work();
  } finally {
    store.knex.off('query', listener);
  }
  return sent;
}

const firstWords = (sql: string) => sql.trim().split(/\s+/).slice(0, 2).join(' ');

describe('statements per claim', () => {
  test('SQLite: a claim is BEGIN IMMEDIATE, the sweep, one UPDATE, COMMIT; a finish-and-claim one UPDATE more', async () => {
    const store = await openSqliteQueueStore({ filename: join(tempDir('leasehold-claim-cost-'), 'q.sqlite') });
    stores.push(store);
    for (const id of ['a', 'b']) await store.enqueue(newJobInput({ id }));
    let lease = null as Awaited<ReturnType<typeof store.claim>>;
    const claim = await sqliteStatements(store, async () => (lease = await store.claim('w1', 60_000)));
    expect(claim).toEqual(['BEGIN IMMEDIATE', 'UPDATE queue_jobs', 'UPDATE queue_jobs', 'COMMIT']);
    let next = null as Awaited<ReturnType<typeof store.claim>>;
    const finishAndClaim = await sqliteStatements(store, async () => {
      next = (await store.finishAndClaim(lease!.id, lease!, null, undefined)).next;
    });
    expect(finishAndClaim).toEqual([
      'BEGIN IMMEDIATE',
      'UPDATE queue_jobs',
      'UPDATE queue_jobs',
      'UPDATE queue_jobs',
      'COMMIT',
    ]);
    expect(next?.id).toBe('b');
  });

  test('SQLite: no statement of a claim binds a bare LIMIT, which SQLite prepares again at every binding', async () => {
    const store = await openSqliteQueueStore({ filename: join(tempDir('leasehold-claim-limit-'), 'q.sqlite') });
    stores.push(store);
    for (const id of ['a', 'b', 'c']) await store.enqueue(newJobInput({ id }));
    const sent = await sqliteStatements(
      store,
      async () => {
        const lease = await store.claim('w1', 60_000);
        await store.finishAndClaim(lease!.id, lease!, null, undefined);
        await store.claimMany('w1', 60_000, 2);
      },
      (sql) => sql,
    );
    const bare = sent.filter((sql) => /\bLIMIT\s+\?/i.test(sql));
    expect(bare, `statements with a bare "LIMIT ?" among the ${sent.length} sent`).toEqual([]);
    expect(sent.filter((sql) => /\bLIMIT\b/i.test(sql)).length).toBeGreaterThan(0);
  });

  test('PostgreSQL: a claim is one statement; a finish-and-claim five; an enqueue NOTIFYs in its insert', async () => {
    // The server's clock, as in production.
    const store = await openPostgresQueueStore({ connectionString: testSchema('lh_cost').url });
    stores.push(store);
    const enqueue = await pgStatements(() => store.enqueue(newJobInput({ id: 'a' })));
    expect(enqueue).toEqual(['BEGIN', 'prepared SELECT floor(extract(epoch', 'prepared INSERT INTO', 'COMMIT']);
    await store.enqueue(newJobInput({ id: 'b' }));
    let lease = null as Awaited<ReturnType<typeof store.claim>>;
    const claim = await pgStatements(async () => (lease = await store.claim('w1', 60_000)));
    expect(claim).toEqual(['prepared WITH spent']);
    let next = null as Awaited<ReturnType<typeof store.claim>>;
    const finishAndClaim = await pgStatements(async () => {
      next = (await store.finishAndClaim(lease!.id, lease!, null, undefined)).next;
    });
    expect(finishAndClaim).toEqual([
      'BEGIN',
      'prepared SELECT floor(extract(epoch',
      'prepared UPDATE queue_jobs',
      'prepared WITH spent',
      'COMMIT',
    ]);
    expect(next?.id).toBe('b');
  });
});
