// The batch path of the receiver store (`recordMany`), against any store that has it: each
// effect judged as `record` alone would judge it, all in one transaction. Each dialect's store
// test calls `effectBatchSuite`.
import { describe, expect, test } from 'vitest';
import { recordEffect, type EffectRequest, type EffectStore, type Recorded } from '../../receiver/index.js';
import { fakeClock } from '../helpers/clock.js';
import type { EffectStoreHarness } from './store.suite.js';
import { replayJournal } from './store.suite.js';

type BatchStore<Tx> = EffectStore<Tx> & Required<Pick<EffectStore<Tx>, 'recordMany'>>;

function batching<Tx>(store: EffectStore<Tx>): BatchStore<Tx> {
  if (store.recordMany === undefined) throw new Error('the store under test has no recordMany');
  return store as BatchStore<Tx>;
}

const outcomes = (recorded: Recorded[]) => recorded.map((r) => r.judgement.outcome);

export function effectBatchSuite<Tx>(name: string, factory: () => Promise<EffectStoreHarness<Tx>>): void {
  describe(`receiver store batches: ${name}`, () => {
    async function setup() {
      const clock = fakeClock(1_000_000);
      const harness = await factory();
      return { ...harness, store: batching(harness.store), clock };
    }

    test('mixed outcomes in one batch: each as alone, in order, with its own journal entry, the totals once', async () => {
      const { store, clock } = await setup();
      await recordEffect(store, { jobId: 'a', qty: 5, token: 3 }, clock);
      clock.advance(10);
      const batch: EffectRequest[] = [
        { jobId: 'b', qty: 2, token: 1 },
        { jobId: 'a', qty: 5, token: 3 },
        { jobId: 'a', qty: 5, token: 2 },
        { jobId: 'a', key: 'other', qty: 1, token: 2 },
        { jobId: 'a', qty: 6, token: 3 },
        { jobId: 'c', key: 'k', body: { z: 1, a: [1, { y: 2, x: 1 }] }, token: 7 },
      ];
      const recorded = await store.recordMany(batch, clock);
      expect(outcomes(recorded)).toEqual(['applied', 'duplicate', 'fenced', 'fenced', 'conflict', 'applied']);
      expect(recorded[1]!.judgement.state.effect).toEqual({ jobId: 'a', qty: 5, token: 3, appliedAt: 1_000_000 });
      expect(recorded[2]!.judgement.state.highestToken).toBe(3);
      expect(recorded[5]!.judgement.state.effect).toEqual({
        jobId: 'c',
        key: 'k',
        body: { a: [1, { x: 1, y: 2 }], z: 1 },
        token: 7,
        appliedAt: 1_000_010,
      });
      expect(await store.totals()).toEqual({ effects: 3, qty: 7 });
      const journal = await store.journal();
      expect(journal.length).toBe(1 + batch.length);
      expect(recorded.map((r) => r.journal.seq).sort((x, y) => x - y)).toEqual(journal.slice(1).map((e) => e.seq));
      expect(replayJournal(journal).filter((row) => row.recorded !== row.replayed)).toEqual([]);
    });

    test('two effects of one job in one batch are judged in order: the second sees the first token and effect', async () => {
      const { store, clock } = await setup();
      const recorded = await store.recordMany(
        [
          { jobId: 'j', key: 'one', qty: 1, token: 5 },
          { jobId: 'j', key: 'two', qty: 1, token: 4 },
          { jobId: 'k', qty: 1, token: 4 },
          { jobId: 'k', qty: 1, token: 6 },
          { jobId: 'k', qty: 2, token: 6 },
        ],
        clock,
      );
      expect(outcomes(recorded)).toEqual(['applied', 'fenced', 'applied', 'duplicate', 'conflict']);
      expect(recorded[1]!.judgement.state.highestToken).toBe(5);
      // The duplicate raised k's fence to 6 inside the batch; the conflict did not undo it.
      expect((await recordEffect(store, { jobId: 'k', qty: 1, token: 5 }, clock)).judgement.outcome).toBe('fenced');
      expect(await store.totals()).toEqual({ effects: 2, qty: 2 });
    });

    test('a batch of distinct jobs, every outcome at once: each as alone, the fences as alone would leave them', async () => {
      const { store, clock } = await setup();
      await recordEffect(store, { jobId: 'dup', qty: 1, token: 2 }, clock);
      await recordEffect(store, { jobId: 'low', qty: 1, token: 5 }, clock);
      await recordEffect(store, { jobId: 'odd', qty: 1, token: 3 }, clock);
      await recordEffect(store, { jobId: 'up', qty: 1, token: 1 }, clock);
      clock.advance(10);
      const batch: EffectRequest[] = [
        { jobId: 'up', key: 'second', qty: 4, token: 2 },
        { jobId: 'odd', qty: 9, token: 4 },
        { jobId: 'new', key: 'k', qty: 2, body: { b: 1, a: 2 }, token: 1 },
        { jobId: 'low', qty: 1, token: 4 },
        { jobId: 'dup', qty: 1, token: 2 },
      ];
      const recorded = await store.recordMany(batch, clock);
      expect(outcomes(recorded)).toEqual(['applied', 'conflict', 'applied', 'fenced', 'duplicate']);
      expect(recorded.map((r) => r.judgement.state.highestToken)).toEqual([2, 3, 1, 5, 2]);
      expect(recorded[1]!.judgement.state.effect).toEqual({ jobId: 'odd', qty: 1, token: 3, appliedAt: 1_000_000 });
      expect(recorded[2]!.judgement.state.effect).toEqual({
        jobId: 'new',
        key: 'k',
        qty: 2,
        body: { a: 2, b: 1 },
        token: 1,
        appliedAt: 1_000_010,
      });
      expect(recorded[4]!.judgement.state.effect).toEqual({ jobId: 'dup', qty: 1, token: 2, appliedAt: 1_000_000 });
      expect(await store.totals()).toEqual({ effects: 4 + 2, qty: 4 + 2 + 4 });
      // The conflict put odd's fence back to 3; the applied, duplicate and new ones raised theirs.
      const probes: [EffectRequest, string][] = [
        [{ jobId: 'odd', key: 'probe', token: 3 }, 'applied'],
        [{ jobId: 'up', key: 'probe', token: 1 }, 'fenced'],
        [{ jobId: 'new', key: 'probe', token: 0 }, 'fenced'],
        [{ jobId: 'low', key: 'probe', token: 5 }, 'applied'],
      ];
      for (const [request, outcome] of probes) {
        expect((await recordEffect(store, request, clock)).judgement.outcome, request.jobId).toBe(outcome);
      }
      const journal = await store.journal();
      expect(journal.slice(4, 9).map((entry) => `${entry.jobId}/${entry.outcome}`)).toEqual([
        'dup/duplicate',
        'low/fenced',
        'new/applied',
        'odd/conflict',
        'up/applied',
      ]);
      expect(recorded.map((r) => r.journal.seq)).toEqual([9, 8, 7, 6, 5].map((n) => journal[n - 1]!.seq));
      expect(replayJournal(journal).filter((row) => row.recorded !== row.replayed)).toEqual([]);
    });

    test('a batch of distinct jobs costs the same statements whatever its size: one per kind, not one per effect', async () => {
      const { store, clock, onStatement } = await setup();
      const sent: string[] = [];
      onStatement((sql) => sent.push(sql));
      const sizes = [2, 8, 40];
      const counts: Record<number, number> = {};
      for (const size of sizes) {
        sent.length = 0;
        const recorded = await store.recordMany(
          Array.from({ length: size }, (_, i) => ({ jobId: `s${size}-${i}`, qty: 1, token: 1 })),
          clock,
        );
        expect(outcomes(recorded)).toEqual(Array.from({ length: size }, () => 'applied'));
        counts[size] = sent.length;
      }
      expect(counts, sent.join('\n')).toEqual({ 2: counts[2], 8: counts[2], 40: counts[2] });
      const count = (pattern: RegExp) => sent.filter((sql) => pattern.test(sql)).length;
      expect({
        fences: count(/insert\s+into\s+receiver_jobs/i),
        effects: count(/insert\s+into\s+receiver_effects/i),
        journal: count(/insert\s+into\s+receiver_journal/i),
      }).toEqual({ fences: 1, effects: 1, journal: 1 });
    });

    test('one transaction for the whole batch: one BEGIN and one COMMIT, one totals update', async () => {
      const { store, clock, onStatement } = await setup();
      const sent: string[] = [];
      onStatement((sql) => sent.push(sql));
      await store.recordMany(
        Array.from({ length: 5 }, (_, i) => ({ jobId: `t${i}`, qty: 1, token: 1 })),
        clock,
      );
      const count = (pattern: RegExp) => sent.filter((sql) => pattern.test(sql)).length;
      expect(
        { begin: count(/^\s*begin/i), commit: count(/^\s*commit/i), totals: count(/update\s+receiver_totals/i) },
        sent.join('\n'),
      ).toEqual({ begin: 1, commit: 1, totals: 1 });
    });

    test('the journal of a batch: each effect its own entry, in the order judged', async () => {
      const { store, clock } = await setup();
      // The jobs in reverse order of their ids, so the order judged (by id) is not the order sent.
      const batch: EffectRequest[] = Array.from({ length: 13 }, (_, i) => ({
        jobId: `j${String(12 - i).padStart(2, '0')}`,
        qty: 1,
        token: i % 3 === 0 ? 2 : 1,
      }));
      batch.push({ jobId: 'j05', qty: 1, token: 1 });
      const recorded = await store.recordMany(batch, clock);
      const journal = await store.journal();
      expect(journal.length).toBe(batch.length);
      const bySeq = new Map(journal.map((entry) => [entry.seq, entry]));
      recorded.forEach((r, i) => {
        expect(bySeq.get(r.journal.seq), `batch[${i}]`).toMatchObject({
          jobId: batch[i]!.jobId,
          token: batch[i]!.token,
          outcome: r.judgement.outcome,
        });
      });
      // The journal reads in the order judged: by job id, a job's own in the order sent.
      expect(journal.map((entry) => `${entry.jobId}/${entry.outcome}`)).toEqual(
        [...batch]
          .map((request, i) => ({ request, i }))
          .sort((x, y) => (x.request.jobId < y.request.jobId ? -1 : x.request.jobId > y.request.jobId ? 1 : x.i - y.i))
          .map(({ i }) => `${batch[i]!.jobId}/${recorded[i]!.judgement.outcome}`),
      );
      expect(replayJournal(journal).filter((row) => row.recorded !== row.replayed)).toEqual([]);
    });

    test('a failure of one effect rolls the whole batch back: apply throwing, or the totals refusing', async () => {
      const { store, clock } = await setup();
      const failing = store.recordMany(
        [
          { jobId: 'a', qty: 1, token: 1 },
          { jobId: 'b', qty: 1, token: 1 },
        ],
        clock,
        async (effect) => {
          if (effect.jobId === 'b') throw new Error('b cannot be applied');
        },
      );
      await expect(failing).rejects.toThrow('b cannot be applied');
      const big = Number.MAX_SAFE_INTEGER - 10;
      const overflowing = store.recordMany(
        [
          { jobId: 'c', qty: big, token: 1 },
          { jobId: 'd', qty: 11, token: 1 },
        ],
        clock,
      );
      await expect(overflowing).rejects.toMatchObject({ code: 'invalid_request' });
      expect({
        totals: await store.totals(),
        journal: await store.journal(),
        effects: await store.listEffects(),
      }).toEqual({
        totals: { effects: 0, qty: 0 },
        journal: [],
        effects: [],
      });
    });

    test('racing batches on two handles: N identical effects give exactly one applied, the journal replays', async () => {
      const { store, openAnother, clock } = await setup();
      const other = batching(await openAnother());
      const stores = [store, other];
      const effect = { jobId: 'race', key: 'pay', qty: 3, token: 2 };
      // Each batch also holds other jobs, in another order, so batches share rows in both orders.
      const batches = Array.from({ length: 12 }, (_, i) => {
        const rest = [
          { jobId: 'x', qty: 1, token: 1 + (i % 3) },
          { jobId: 'y', qty: 1, token: 1 + (i % 2) },
        ];
        return i % 2 === 0 ? [effect, ...rest] : [...rest.reverse(), effect];
      });
      const results = await Promise.all(batches.map((batch, i) => stores[i % 2]!.recordMany(batch, clock)));
      const raced = results.map((recorded, i) => recorded[batches[i]!.indexOf(effect)]!.judgement.outcome);
      expect(raced.filter((o) => o === 'applied').length, raced.join(', ')).toBe(1);
      expect(raced.filter((o) => o !== 'applied' && o !== 'duplicate')).toEqual([]);
      const journal = await store.journal();
      expect(journal.length).toBe(12 * 3);
      expect(replayJournal(journal).filter((row) => row.recorded !== row.replayed)).toEqual([]);
      expect(await other.totals()).toEqual({ effects: 3, qty: 5 });
    });

    test('an empty batch records nothing', async () => {
      const { store, clock } = await setup();
      expect(await store.recordMany([], clock)).toEqual([]);
      expect(await store.journal()).toEqual([]);
    });
  });
}
