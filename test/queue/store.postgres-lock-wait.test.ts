// PostgreSQL, the server's clock: a batched finish judges every finish at a `now` read after it
// holds all its rows, so a batch that waited for a row past the leases' end is refused.
import { afterEach, expect, test } from 'vitest';
import { openPostgresQueueStore, QueueError } from '../../queue/index.js';
import { holdJobRow, testSchema } from '../helpers/postgres.js';
import { newJobInput } from './store.suite.js';

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

test('a batch that waits for one of its rows past leaseUntil is refused whole, lease_expired, and changes nothing', async () => {
  const { url, schema } = testSchema('lh_batchwait');
  const store = await openPostgresQueueStore({ connectionString: url });
  closers.push(() => store.close());
  for (const id of ['first', 'held']) await store.enqueue(newJobInput({ id }));
  const leases = await store.claimMany('w1', 600, 2);
  expect(leases.map((l) => l.id).sort()).toEqual(['first', 'held']);
  const until = Math.max(...leases.map((l) => l.leaseUntil));
  // A second connection holds one of the rows, in a transaction, past the leases' end.
  const holder = await holdJobRow(schema, 'held');
  closers.push(() => holder.release());
  const batch = store.finishMany(
    'w1',
    leases.map((l) => ({ id: l.id, token: l.token, result: 'late' })),
    { leaseMs: undefined },
  );
  await sleep(100);
  expect(Date.now(), 'the batch was sent before leaseUntil').toBeLessThan(Math.min(...leases.map((l) => l.leaseUntil)));
  while (Date.now() <= until + 200) await sleep(50);
  await holder.release();
  const { results, next } = await batch;
  expect(
    results.map((r) => (r instanceof QueueError ? [r.code, r.details.reason] : ['accepted', (r as { id: string }).id])),
  ).toEqual([
    ['stale_lease', 'lease_expired'],
    ['stale_lease', 'lease_expired'],
  ]);
  expect(next).toEqual([]);
  for (const lease of leases)
    expect(await store.get(lease.id)).toMatchObject({ status: 'leased', token: lease.token, result: null });
});

test("without an injected clock, a batch is judged on the server's clock: accepted within the lease", async () => {
  const { url } = testSchema('lh_batchclock');
  const store = await openPostgresQueueStore({ connectionString: url });
  closers.push(() => store.close());
  for (const id of ['a', 'b', 'c']) await store.enqueue(newJobInput({ id }));
  const leases = await store.claimMany('w1', 60_000, 2);
  const { results, next } = await store.finishMany(
    'w1',
    [...leases.map((l) => ({ id: l.id, token: l.token, result: 1 })), { id: 'nope', token: 1, result: null }],
    { leaseMs: undefined },
  );
  expect(results.map((r) => (r instanceof QueueError ? r.code : r.status))).toEqual(['done', 'done', 'unknown_job']);
  expect(next.map((l) => l.id)).toEqual(['c']);
  // A batch of unknown jobs locks no row and still reads the clock.
  const unknown = await store.finishMany('w1', [{ id: 'ghost', token: 1, result: null }], { leaseMs: undefined });
  expect((unknown.results[0] as QueueError).code).toBe('unknown_job');
});
