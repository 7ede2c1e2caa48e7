// The store conformance suite for batched finishes (QueueStore.finishMany), run on every store
// by the same factory as store.suite.ts: each finish judged as the single finish would judge
// it, at one `now`, in one transaction of a constant number of statements.
import { describe, expect, test } from 'vitest';
import { installCounters, processCounts } from '../../bench/counting.js';
import type { Job, LateFinishPolicy, Lease, QueueStore } from '../../queue/index.js';
import { QueueError } from '../../queue/index.js';
import { rejection, storeSetup, type StoreFactory } from './store.suite.js';

/** An answer as the wire would carry it: a Job as is, a refusal as its error body and status. */
function answered(result: Job | QueueError): unknown {
  return result instanceof QueueError ? { ...result.toJSON(), status: result.status } : result;
}

/** The single finish's own answer for the same finish: the job, or the error it throws. */
async function singleAnswer(store: QueueStore, id: string, owner: string, token: number): Promise<unknown> {
  return store.finish(id, { owner, token }, null).then(answered, (err: unknown) => {
    if (!(err instanceof QueueError)) throw err;
    return answered(err);
  });
}

export function finishManySuite(name: string, factory: StoreFactory): void {
  describe(`queue store finishMany: ${name}`, () => {
    async function setup(latePolicy: LateFinishPolicy = 'reject') {
      const harness = await storeSetup(factory, latePolicy);
      const { store, enqueue } = harness;
      /** `n` jobs enqueued together and leased to `owner`, in the order of their numbers. */
      const leased = async (prefix: string, n: number, owner = 'w1', leaseMs = 1_000): Promise<Lease[]> => {
        const ids = Array.from({ length: n }, (_, i) => `${prefix}-${i}`);
        await Promise.all(ids.map((id) => enqueue({ id })));
        const leases = await store.claimMany(owner, leaseMs, n);
        const number = (lease: Lease) => Number(lease.id.slice(prefix.length + 1));
        leases.sort((a, b) => number(a) - number(b));
        expect(leases.map((l) => l.id)).toEqual(ids);
        return leases;
      };
      return { ...harness, leased };
    }

    test('all accepted: every job done with its own result, at one now, in the order given', async () => {
      const { store, clock, leased } = await setup();
      const leases = await leased('a', 3);
      clock.advance(10);
      const items = [leases[2]!, leases[0]!, leases[1]!].map((l, i) => ({
        id: l.id,
        token: l.token,
        result: { n: i },
      }));
      const { results, next } = await store.finishMany('w1', items, undefined);
      expect(next).toEqual([]);
      expect(results.map((r) => (r instanceof QueueError ? r.code : [r.id, r.status, r.result, r.updatedAt]))).toEqual([
        ['a-2', 'done', { n: 0 }, clock.now()],
        ['a-0', 'done', { n: 1 }, clock.now()],
        ['a-1', 'done', { n: 2 }, clock.now()],
      ]);
      for (const result of results) expect(await store.get((result as Job).id)).toEqual(result);
    });

    test('each refusal is exactly what the single finish answers, and changes nothing', async () => {
      const { store, clock, enqueue, claim, leased } = await setup();
      const t = clock.now();
      const [ok, wrongToken] = await leased('m', 2, 'w1', 5_000);
      await enqueue({ id: 'deadline', deadline: t + 500 });
      const atDeadline = await claim('w1', 5_000);
      await enqueue({ id: 'short' });
      const short = await claim('w1', 500);
      await enqueue({ id: 'theirs' });
      const theirs = await claim('w2', 5_000);
      await enqueue({ id: 'cancelled' });
      const gone = await claim('w1', 5_000);
      await store.cancel(gone.id, 'withdrawn');
      await enqueue({ id: 'done-before' });
      const doneBefore = await claim('w1', 5_000);
      await store.finish(doneBefore.id, doneBefore, 'first');
      expect({ atDeadline: atDeadline.id, leaseUntil: atDeadline.leaseUntil }).toEqual({
        atDeadline: 'deadline',
        leaseUntil: t + 500,
      });
      // At exactly leaseUntil of `short` (rule 2: ended) and the deadline of `deadline` (rule 4).
      clock.set(short.leaseUntil);
      expect(short.leaseUntil).toBe(t + 500);
      const items = [
        { id: ok!.id, token: ok!.token, result: 'ok' },
        { id: wrongToken!.id, token: wrongToken!.token + 1, result: null },
        { id: theirs.id, token: theirs.token, result: null },
        { id: short.id, token: short.token, result: null },
        { id: atDeadline.id, token: atDeadline.token, result: null },
        { id: gone.id, token: gone.token, result: null },
        { id: 'never-enqueued', token: 1, result: null },
        { id: doneBefore.id, token: doneBefore.token, result: 'again' },
      ];
      const ids = items.map((item) => item.id);
      const before = await rows(store, ids);
      const { results } = await store.finishMany('w1', items, undefined);
      const reasons = results.map((r) => (r instanceof QueueError ? [r.code, r.details.reason ?? null] : r.status));
      expect(reasons).toEqual([
        'done',
        ['stale_lease', 'token_mismatch'],
        ['stale_lease', 'owner_mismatch'],
        ['stale_lease', 'lease_expired'],
        ['stale_lease', 'deadline_passed'],
        ['stale_lease', 'not_leased'],
        ['unknown_job', null],
        ['stale_lease', 'not_leased'],
      ]);
      const after = await rows(store, ids);
      expect(after.slice(1), 'the refused rows are unchanged').toEqual(before.slice(1));
      // The single finish, at the same now, on the same rows, answers each refusal the same way.
      for (let i = 1; i < items.length; i++) {
        const { id, token } = items[i]!;
        expect(answered(results[i]!), id).toEqual(await singleAnswer(store, id, 'w1', token));
      }
      expect((results[7] as QueueError).details.current).toEqual({
        status: 'done',
        owner: 'w1',
        token: doneBefore.token,
        leaseUntil: doneBefore.leaseUntil,
      });
    });

    test('at leaseUntil - 1 the same finish is accepted', async () => {
      const { store, clock, leased } = await setup();
      const [lease] = await leased('edge', 1, 'w1', 1_000);
      clock.set(lease!.leaseUntil - 1);
      const { results } = await store.finishMany('w1', [{ id: lease!.id, token: lease!.token, result: 1 }], undefined);
      expect(answered(results[0]!)).toMatchObject({ status: 'done', result: 1 });
    });

    test('next: at most one lease per accepted finish, in claim order, lasting the first accepted lease', async () => {
      const { store, clock, enqueue, leased } = await setup();
      const held = await leased('h', 3, 'w1', 2_000);
      await enqueue({ id: 'n-low' });
      await enqueue({ id: 'n-high', priority: 5 });
      await enqueue({ id: 'n-third' });
      await enqueue({ id: 'n-fourth' });
      clock.advance(10);
      const items = [
        { id: held[0]!.id, token: held[0]!.token + 7, result: null },
        { id: held[1]!.id, token: held[1]!.token, result: null },
        { id: held[2]!.id, token: held[2]!.token, result: null },
      ];
      const { results, next } = await store.finishMany('w1', items, { leaseMs: undefined });
      expect(results.map((r) => (r instanceof QueueError ? r.code : r.status))).toEqual([
        'stale_lease',
        'done',
        'done',
      ]);
      expect(next.map(({ id, owner, token, leaseUntil }) => ({ id, owner, token, leaseUntil }))).toEqual([
        { id: 'n-high', owner: 'w1', token: 1, leaseUntil: clock.now() + 2_000 },
        { id: 'n-low', owner: 'w1', token: 1, leaseUntil: clock.now() + 2_000 },
      ]);
      for (const lease of next) expect(await store.get(lease.id)).toMatchObject({ status: 'leased', owner: 'w1' });
      // leaseMs given; fewer claimable jobs than accepted finishes.
      const more = await store.finishMany(
        'w1',
        next.map((l) => ({ id: l.id, token: l.token, result: null })),
        { leaseMs: 700 },
      );
      expect(more.next.map(({ id, leaseUntil }) => ({ id, leaseUntil }))).toEqual([
        { id: 'n-third', leaseUntil: clock.now() + 700 },
        { id: 'n-fourth', leaseUntil: clock.now() + 700 },
      ]);
      const last = await store.finishMany(
        'w1',
        more.next.map((l) => ({ id: l.id, token: l.token, result: null })),
        { leaseMs: undefined },
      );
      expect(last.next).toEqual([]);
    });

    test('next: all refused claims nothing and changes nothing', async () => {
      const { store, clock, enqueue, leased } = await setup();
      const held = await leased('r', 2, 'w1', 100);
      await enqueue({ id: 'waiting' });
      clock.advance(100);
      const { results, next } = await store.finishMany(
        'w1',
        held.map((l) => ({ id: l.id, token: l.token, result: null })),
        { leaseMs: 1_000 },
      );
      expect(results.map((r) => (r instanceof QueueError ? r.details.reason : r.status))).toEqual([
        'lease_expired',
        'lease_expired',
      ]);
      expect(next).toEqual([]);
      expect(await store.get('waiting')).toMatchObject({ status: 'pending', token: 0 });
      expect(await store.stats()).toEqual({ pending: 1, leased: 2, done: 0, dead: 0 });
    });

    test('if-unclaimed: an expired lease nobody claimed since is finished; once claimed, token_mismatch', async () => {
      const { store, clock, claim, leased } = await setup('if-unclaimed');
      const leases = await leased('u', 2, 'w1', 1_000);
      clock.set(leases[0]!.leaseUntil + 5_000);
      const retaken = await claim('w2', 1_000);
      const taken = leases.find((l) => l.id === retaken.id);
      const late = leases.find((l) => l.id !== retaken.id);
      const { results } = await store.finishMany(
        'w1',
        [late!, taken!].map((l) => ({ id: l.id, token: l.token, result: null })),
        undefined,
      );
      expect(results.map((r) => (r instanceof QueueError ? r.details.reason : r.status))).toEqual([
        'done',
        'token_mismatch',
      ]);
    });

    test('the same id twice is invalid_request and nothing changes', async () => {
      const { store, leased } = await setup();
      const leases = await leased('d', 2);
      const before = await rows(
        store,
        leases.map((l) => l.id),
      );
      const items = [leases[0]!, leases[1]!, leases[0]!].map((l) => ({ id: l.id, token: l.token, result: null }));
      const err = await rejection(store.finishMany('w1', items, { leaseMs: undefined }), 'invalid_request');
      expect(err.message).toContain(leases[0]!.id);
      expect(
        await rows(
          store,
          leases.map((l) => l.id),
        ),
      ).toEqual(before);
    });

    test('a repeat of a batch that landed: each answer shows the job done under the same owner and token', async () => {
      const { store, leased } = await setup();
      const leases = await leased('again', 3);
      const items = leases.map((l) => ({ id: l.id, token: l.token, result: 'r' }));
      const first = await store.finishMany('w1', items, undefined);
      const repeat = await store.finishMany('w1', items, { leaseMs: undefined });
      expect(repeat.next).toEqual([]);
      expect(
        repeat.results.map((r) =>
          r instanceof QueueError ? { code: r.code, ...(r.details as object) } : { status: r.status },
        ),
      ).toEqual(
        leases.map((l) => ({
          code: 'stale_lease',
          reason: 'not_leased',
          expected: { owner: 'w1', token: l.token },
          current: { status: 'done', owner: 'w1', token: l.token, leaseUntil: l.leaseUntil },
        })),
      );
      expect((repeat.results[0] as QueueError).message).toContain('already finished');
      expect(first.results.every((r) => !(r instanceof QueueError))).toBe(true);
    });

    test('statements per batch do not grow with the batch: 1, 8 and 32 finishes', async () => {
      installCounters();
      const { store, enqueue, leased } = await setup();
      // With `refused`, the batch names one more job, unknown: its refusal claims nothing.
      const cost = async (size: number, refused: boolean) => {
        const prefix = `s${size}${refused ? 'r' : ''}`;
        const leases = await leased(prefix, size, 'w1', 60_000);
        await Promise.all(Array.from({ length: size }, (_, i) => enqueue({ id: `${prefix}-next-${i}` })));
        const items: Array<{ id: string; token: number; result: unknown }> = leases.map((l, i) => ({
          id: l.id,
          token: l.token,
          result: i,
        }));
        if (refused) items.push({ id: `${prefix}-unknown`, token: 1, result: null });
        const before = await quiet();
        const { results, next } = await store.finishMany('w1', items, { leaseMs: undefined });
        const statements = processCounts().statements - before;
        const accepted = results.filter((r) => !(r instanceof QueueError)).length;
        return { size, refused, accepted, next: next.length, statements };
      };
      const costs: Array<Awaited<ReturnType<typeof cost>>> = [];
      for (const refused of [false, true]) for (const size of [1, 8, 32]) costs.push(await cost(size, refused));
      const statements = (refused: boolean) => costs.filter((c) => c.refused === refused).map((c) => c.statements);
      expect(costs.map(({ size, refused, accepted, next }) => ({ size, refused, accepted, next }))).toEqual(
        [false, true].flatMap((refused) => [1, 8, 32].map((size) => ({ size, refused, accepted: size, next: size }))),
      );
      const [one] = statements(false);
      expect(statements(false), JSON.stringify(costs)).toEqual([one, one, one]);
      // A refusal adds the one read that explains every refusal of the batch.
      expect(statements(true), JSON.stringify(costs)).toEqual([one! + 1, one! + 1, one! + 1]);
    });

    test('two batches racing on the same jobs from two connections: each job finished exactly once', async () => {
      const { store, openAnother, leased } = await setup();
      const other = await openAnother();
      const leases = await leased('race', 40, 'w1', 60_000);
      const items = leases.map((l) => ({ id: l.id, token: l.token, result: null }));
      // The second batch names the jobs in the reverse order, so the two take them in opposite orders.
      const [a, b] = await Promise.all([
        store.finishMany('w1', items, undefined),
        other.finishMany('w1', [...items].reverse(), undefined),
      ]);
      const finishedBy = new Map<string, string[]>();
      const record = (who: string, results: Array<Job | QueueError>, order: typeof items) =>
        results.forEach((result, i) => {
          const id = order[i]!.id;
          if (!(result instanceof QueueError)) finishedBy.set(id, [...(finishedBy.get(id) ?? []), who]);
          else expect(result.details, id).toMatchObject({ reason: 'not_leased', current: { status: 'done' } });
        });
      record('a', a.results, items);
      record('b', b.results, [...items].reverse());
      const twice = [...finishedBy].filter(([, who]) => who.length !== 1);
      expect({ finished: finishedBy.size, twice }).toEqual({ finished: 40, twice: [] });
      expect(await store.stats()).toEqual({ pending: 0, leased: 0, done: 40, dead: 0 });
    });
  });
}

/**
 * The statement count once nothing else runs: an enqueue's NOTIFY to other processes
 * (PostgreSQL) is sent after it answers, and must not be counted as the batch's.
 */
async function quiet(): Promise<number> {
  for (let last = -1; ;) {
    const now = processCounts().statements;
    if (now === last) return now;
    last = now;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function rows(store: QueueStore, ids: readonly string[]): Promise<Array<Job | null>> {
  return Promise.all(ids.map((id) => store.get(id)));
}
