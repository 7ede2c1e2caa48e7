// The store conformance suite on PostgreSQL, each test in a schema of its own; plus what only
// PostgreSQL has: the server's clock as the authority, and concurrent claims on several pools.
import { afterEach, describe, expect, test } from 'vitest';
import { openPostgres, parsePostgresUrl } from '../../platform/postgres.js';
import { openPostgresQueueStore, type Lease, type QueueStore } from '../../queue/index.js';
import { fakeClock } from '../helpers/clock.js';
import { testSchema } from '../helpers/postgres.js';
import { finishManySuite } from './store-finish-many.suite.js';
import { newJobInput, queueStoreSuite, type StoreFactory } from './store.suite.js';

const open: QueueStore[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((s) => s.close()));
});

async function openStore(
  url: string,
  options: Omit<Parameters<typeof openPostgresQueueStore>[0], 'connectionString'> = {},
) {
  const store = await openPostgresQueueStore({ connectionString: url, ...options });
  open.push(store);
  return store;
}

const factory: StoreFactory = async ({ clock, latePolicy }) => {
  const { url } = testSchema();
  const openOne = () => openStore(url, { clock, latePolicy });
  return { store: await openOne(), clock, openAnother: openOne };
};

queueStoreSuite('postgres', factory);
finishManySuite('postgres', factory);

describe('queue store: postgres only', () => {
  async function serverNow(url: string): Promise<number> {
    const knex = openPostgres(parsePostgresUrl(url));
    try {
      const result = await knex.raw('SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now');
      return Number((result as { rows: Array<{ now: string }> }).rows[0]!.now);
    } finally {
      await knex.destroy();
    }
  }

  test("without a clock override, lease decisions use the database server's clock", async () => {
    const { url } = testSchema();
    const store = await openStore(url);
    const before = await serverNow(url);
    const { job } = await store.enqueue(newJobInput({ id: 'timed' }));
    const lease = (await store.claim('w1', 60_000))!;
    const after = await serverNow(url);
    const within = (t: number) => ({ t, inWindow: t >= before && t <= after });
    expect(within(job.createdAt)).toEqual({ t: job.createdAt, inWindow: true });
    expect(within(lease.leaseUntil - 60_000)).toEqual({ t: lease.leaseUntil - 60_000, inWindow: true });
    expect((await store.verify('timed', lease)).token).toBe(1);
  });

  test('a claim at the instant a lease ends takes the job though its holder holds the row for a moment (rule 2)', async () => {
    const { url, schema } = testSchema();
    const clock = fakeClock(1_000_000);
    const store = await openStore(url, { clock });
    await store.enqueue(newJobInput({ id: 'held' }));
    const first = (await store.claim('w1', 30_000))!;
    clock.advance(30_000);
    // A holder's write in flight, as a zombie's heartbeat is when its lease ends: the row is
    // locked by a transaction that will change nothing.
    const holder = openPostgres({ ...parsePostgresUrl(url), schema, poolMax: 1 });
    try {
      const trx = await holder.transaction();
      await trx.raw('SELECT seq FROM queue_jobs WHERE id = ? FOR UPDATE', ['held']);
      const claiming = store.claim('w2', 30_000);
      await new Promise((resolve) => setTimeout(resolve, 50));
      await trx.rollback();
      const second = await claiming;
      expect({ owner: second?.owner, token: second?.token }).toEqual({ owner: 'w2', token: first.token + 1 });
    } finally {
      await holder.destroy();
    }
  });

  test('a claim finds nothing at once when nothing is claimable, held or not', async () => {
    const { url } = testSchema();
    const clock = fakeClock(1_000_000);
    const store = await openStore(url, { clock });
    await store.enqueue(newJobInput({ id: 'leased' }));
    expect((await store.claim('w1', 30_000))?.owner).toBe('w1');
    const started = performance.now();
    expect(await store.claim('w2', 30_000)).toBeNull();
    expect(performance.now() - started).toBeLessThan(150);
  });

  test('a schema in the URL is created on start and holds every table; two stores start on it at once', async () => {
    const { url, schema } = testSchema();
    await Promise.all([openStore(url), openStore(url), openStore(url)]);
    const knex = openPostgres(parsePostgresUrl(url));
    try {
      const tables = await knex('information_schema.tables').where({ table_schema: schema }).pluck('table_name');
      expect([...tables].sort()).toEqual(['queue_jobs', 'queue_migrations', 'queue_migrations_lock']);
    } finally {
      await knex.destroy();
    }
  });

  test('concurrent claimers on three pools: every job leased once, none skipped, none left', async () => {
    const { url } = testSchema();
    const stores = await Promise.all([openStore(url), openStore(url), openStore(url)]);
    const total = 150;
    for (let i = 0; i < total; i++) await stores[0]!.enqueue(newJobInput({ id: `c-${i}`, priority: i % 3 }));
    const leases: Lease[] = [];
    const errors: string[] = [];
    const claimer = async (k: number) => {
      for (let empty = 0; empty < 3;) {
        const store = stores[k % stores.length]!;
        try {
          const lease = await store.claim(`w${k}`, 60_000);
          if (!lease) {
            empty++;
            continue;
          }
          empty = 0;
          leases.push(lease);
          await store.finish(lease.id, lease, null);
        } catch (err) {
          errors.push(String(err));
        }
      }
    };
    await Promise.all(Array.from({ length: 12 }, (_, k) => claimer(k)));
    const perJob = new Map<string, number>();
    for (const lease of leases) perJob.set(lease.id, (perJob.get(lease.id) ?? 0) + 1);
    const leasedTwice = [...perJob].filter(([, n]) => n > 1);
    expect({ errors, leasedTwice, distinctJobs: perJob.size }).toEqual({
      errors: [],
      leasedTwice: [],
      distinctJobs: total,
    });
    expect(await stores[1]!.stats()).toEqual({ pending: 0, leased: 0, done: total, dead: 0 });
  });

  test('concurrent claims after a mass expiry: every spent or past-deadline job becomes dead, none gets a token', async () => {
    const { url } = testSchema();
    const clock = fakeClock(1_000_000);
    const stores = await Promise.all([1, 2, 3].map(() => openStore(url, { clock })));
    const spent = 40;
    const late = 40;
    for (let i = 0; i < spent; i++) await stores[0]!.enqueue(newJobInput({ id: `spent-${i}`, maxAttempts: 1 }));
    for (let i = 0; i < late; i++) await stores[0]!.enqueue(newJobInput({ id: `late-${i}`, deadlineMs: 5_000 }));
    for (let i = 0; i < spent + late; i++) await stores[0]!.claim('first', 1_000);
    clock.advance(5_000);
    const answers = await Promise.all(
      Array.from({ length: 30 }, (_, k) =>
        stores[k % 3]!.claim(`late-claimer-${k}`, 1_000).then((lease) => lease?.id ?? null),
      ),
    );
    expect(answers.filter((id) => id !== null)).toEqual([]);
    // A claim now must still find nothing: whatever a sweep skipped was swept by another.
    expect(await stores[2]!.claim('after', 1_000)).toBeNull();
    const dead = await stores[1]!.list({ status: 'dead', limit: 1_000 });
    const reasons = new Map<string, number>();
    for (const job of dead) reasons.set(job.deadReason ?? 'none', (reasons.get(job.deadReason ?? 'none') ?? 0) + 1);
    expect(Object.fromEntries(reasons)).toEqual({ attempts_exhausted: spent, deadline_passed: late });
    expect(dead.every((job) => job.token === 1)).toBe(true);
  });
});
