// The receiver store conformance suite: recording, reads, reset and racing writers, against
// any EffectStore. Each dialect's test file calls `effectStoreSuite`; there is no second copy.
import type { Knex } from 'knex';
import { describe, expect, test } from 'vitest';
import {
  judge,
  recordEffect,
  type ApplyEffect,
  type Effect,
  type EffectDialect,
  type EffectStore,
  type JobState,
  type JournalEntry,
} from '../../receiver/index.js';
import { fakeClock } from '../helpers/clock.js';
import { keyedEffectsSuite } from './store-keys.suite.js';

export interface EffectStoreHarness<Tx> {
  store: EffectStore<Tx>;
  /** Another handle on the same database, as a second process would open it. */
  openAnother(): Promise<EffectStore<Tx>>;
  /** Calls `listener` for every statement `store` sends to the database, BEGIN and COMMIT included. */
  onStatement(listener: (sql: string) => void): void;
  /** A knex handle on another, empty database (no table at all), closed after the test, and its dialect. */
  emptyDatabase(): Promise<{ knex: Knex; dialect: EffectDialect }>;
}

/**
 * Replays a journal through the pure rules: every recorded outcome must be what judge says, given
 * the effect of the entry's (jobId, key) and its job's highest token, as the entries before left them.
 */
export function replayJournal(journal: JournalEntry[]): Array<{ seq: number; recorded: string; replayed: string }> {
  const highest = new Map<string, number>();
  const effects = new Map<string, Effect>();
  return journal.map((entry) => {
    const id = JSON.stringify([entry.jobId, entry.key ?? null]);
    const highestToken = highest.get(entry.jobId);
    const state = highestToken === undefined ? undefined : { effect: effects.get(id), highestToken };
    const judgement = judge(state, entry, entry.at);
    highest.set(entry.jobId, judgement.state.highestToken);
    if (judgement.state.effect) effects.set(id, judgement.state.effect);
    return { seq: entry.seq, recorded: entry.outcome, replayed: judgement.outcome };
  });
}

export function effectStoreSuite<Tx>(name: string, factory: () => Promise<EffectStoreHarness<Tx>>): void {
  describe(`receiver store: ${name}`, () => {
    async function setup() {
      const clock = fakeClock(1_000_000);
      const harness = await factory();
      const record = (jobId: string, qty: number, token: number) =>
        recordEffect(harness.store, { jobId, qty, token }, clock).then((r) => r.judgement.outcome);
      return { ...harness, clock, record };
    }

    test('records each outcome, keeps the first effect and journals every judged request in order', async () => {
      const { store, clock, record } = await setup();
      expect(await record('a', 5, 3)).toBe('applied');
      clock.advance(10);
      expect(await record('a', 5, 6)).toBe('duplicate');
      clock.advance(10);
      expect(await record('a', 5, 4)).toBe('fenced');
      expect(await record('a', 9, 6)).toBe('conflict');
      expect(await record('b', 2, 1)).toBe('applied');

      expect(await store.getEffect('a')).toEqual({ jobId: 'a', qty: 5, token: 3, appliedAt: 1_000_000 });
      expect(await store.getEffect('missing')).toBeUndefined();
      expect(await store.listEffects()).toEqual([
        { jobId: 'a', qty: 5, token: 3, appliedAt: 1_000_000 },
        { jobId: 'b', qty: 2, token: 1, appliedAt: 1_000_020 },
      ]);
      expect(await store.totals()).toEqual({ effects: 2, qty: 7 });
      const journal = await store.journal();
      expect(journal.map(({ jobId, qty, token, outcome, at }) => ({ jobId, qty, token, outcome, at }))).toEqual([
        { jobId: 'a', qty: 5, token: 3, outcome: 'applied', at: 1_000_000 },
        { jobId: 'a', qty: 5, token: 6, outcome: 'duplicate', at: 1_000_010 },
        { jobId: 'a', qty: 5, token: 4, outcome: 'fenced', at: 1_000_020 },
        { jobId: 'a', qty: 9, token: 6, outcome: 'conflict', at: 1_000_020 },
        { jobId: 'b', qty: 2, token: 1, outcome: 'applied', at: 1_000_020 },
      ]);
      const seqs = journal.map((entry) => entry.seq);
      expect(seqs, 'journal seq strictly increasing').toEqual([...seqs].sort((x, y) => x - y));
      expect(new Set(seqs).size).toBe(seqs.length);
    });

    test('each recorded judgement is the one judge gives on the state before it, `changed` included', async () => {
      const { store, clock } = await setup();
      let state: JobState | undefined;
      const requests: Array<[qty: number, token: number]> = [
        [5, 3],
        [5, 3],
        [5, 8],
        [5, 8],
        [5, 4],
        [6, 9],
        [5, 9],
      ];
      for (const [qty, token] of requests) {
        clock.advance(1);
        const request = { jobId: 'a', qty, token };
        const expected = judge(state, request, clock.now());
        expect((await recordEffect(store, request, clock)).judgement, JSON.stringify(request)).toEqual(expected);
        state = expected.state;
      }
    });

    test('a duplicate with a higher token raises the highest token, so the old token is then fenced', async () => {
      const { record } = await setup();
      await record('a', 5, 3);
      expect(await record('a', 5, 3)).toBe('duplicate');
      expect(await record('a', 5, 8)).toBe('duplicate');
      expect(await record('a', 5, 3)).toBe('fenced');
      expect(await record('a', 5, 7)).toBe('fenced');
      expect(await record('a', 5, 8)).toBe('duplicate');
    });

    test('rejected requests do not raise the highest token', async () => {
      const { record } = await setup();
      await record('a', 5, 3);
      expect(await record('a', 6, 9)).toBe('conflict');
      expect(await record('a', 5, 4)).toBe('duplicate');
    });

    test('tokens and quantities up to 2^53 - 1 round-trip exactly', async () => {
      const { store, record } = await setup();
      const max = Number.MAX_SAFE_INTEGER;
      expect(await record('big', max, max - 1)).toBe('applied');
      expect(await record('big', max, max)).toBe('duplicate');
      expect(await record('big', max, max - 1)).toBe('fenced');
      expect(await store.getEffect('big')).toMatchObject({ qty: max, token: max - 1 });
    });

    test('the totals stay exact: an effect that would take the sum past 2^53 - 1 is refused and records nothing', async () => {
      const { store, clock, record } = await setup();
      const max = Number.MAX_SAFE_INTEGER;
      expect(await record('big', max - 10, 1)).toBe('applied');
      expect(await record('fits', 10, 1)).toBe('applied');
      const before = { effects: await store.listEffects(), journal: await store.journal() };
      const refused = recordEffect(store, { jobId: 'one-too-many', qty: 1, token: 1 }, clock);
      await expect(refused).rejects.toMatchObject({ code: 'invalid_request', status: 400 });
      await expect(refused).rejects.toThrow(/past 9007199254740991/);
      expect(await store.totals()).toEqual({ effects: 2, qty: max });
      expect({ effects: await store.listEffects(), journal: await store.journal() }).toEqual(before);
      // A duplicate adds nothing to the sum, so it is still answered.
      expect(await record('fits', 10, 2)).toBe('duplicate');
    });

    test('a job id of 256 characters, the API limit, is stored and read back whole', async () => {
      const { store, record } = await setup();
      const id = `j${'x'.repeat(254)}é`;
      expect(id.length).toBe(256);
      expect(await record(id, 3, 1)).toBe('applied');
      expect(await record(id, 3, 1)).toBe('duplicate');
      expect(await store.getEffect(id)).toMatchObject({ jobId: id, qty: 3 });
      expect((await store.journal()).map((entry) => entry.jobId)).toEqual([id, id]);
    });

    test('listings a page at a time: effects by jobId after a cursor, the journal by seq after a cursor', async () => {
      const { store, record } = await setup();
      for (const jobId of ['c', 'a', 'd', 'b']) await record(jobId, 1, 1);
      expect((await store.listEffects({ limit: 2 })).map((e) => e.jobId)).toEqual(['a', 'b']);
      expect((await store.listEffects({ after: 'b', limit: 2 })).map((e) => e.jobId)).toEqual(['c', 'd']);
      expect(await store.listEffects({ after: 'd', limit: 2 })).toEqual([]);
      const journal = await store.journal();
      expect(await store.journal({ limit: 3 })).toEqual(journal.slice(0, 3));
      expect(await store.journal({ after: journal[2]!.seq, limit: 3 })).toEqual(journal.slice(3));
    });

    test('apply runs once, inside the transaction; when it throws nothing is recorded', async () => {
      const { store, clock } = await setup();
      const applied: string[] = [];
      const failing = recordEffect(store, { jobId: 'a', qty: 1, token: 1 }, clock, async () => {
        throw new Error('downstream is down');
      });
      await expect(failing).rejects.toThrow('downstream is down');
      expect(await store.totals()).toEqual({ effects: 0, qty: 0 });
      expect(await store.journal()).toEqual([]);

      const apply = async (effect: { jobId: string }) => {
        applied.push(effect.jobId);
      };
      expect((await recordEffect(store, { jobId: 'a', qty: 1, token: 1 }, clock, apply)).judgement.outcome).toBe(
        'applied',
      );
      expect((await recordEffect(store, { jobId: 'a', qty: 1, token: 2 }, clock, apply)).judgement.outcome).toBe(
        'duplicate',
      );
      expect(applied).toEqual(['a']);
    });

    // The recording is two conditional writes (the job's fence, then the effect) plus the journal
    // entry; a refused fence adds a read, to explain it, and a refused effect a read and the write
    // that puts the fence back. A lone request runs in a transaction of its own.
    test('statements per request: six when applied (the totals), five when duplicate or fenced, seven when conflict', async () => {
      const { store, clock, onStatement } = await setup();
      const sent: string[] = [];
      onStatement((sql) => sent.push(sql));
      const cost = async (jobId: string, qty: number, token: number, apply?: ApplyEffect<Tx>) => {
        sent.length = 0;
        const { outcome } = (await recordEffect(store, { jobId, qty, token }, clock, apply)).judgement;
        return { outcome, statements: sent.length, sent: [...sent] };
      };
      const costs = [
        await cost('a', 5, 3),
        await cost('a', 5, 3),
        await cost('a', 5, 4),
        await cost('a', 5, 2),
        await cost('a', 6, 4),
        await cost('b', 1, 1, async () => undefined),
      ];
      expect(
        costs.map(({ outcome, statements }) => ({ outcome, statements })),
        JSON.stringify(costs, null, 1),
      ).toEqual([
        { outcome: 'applied', statements: 6 },
        { outcome: 'duplicate', statements: 5 },
        { outcome: 'duplicate', statements: 5 },
        { outcome: 'fenced', statements: 5 },
        { outcome: 'conflict', statements: 7 },
        { outcome: 'applied', statements: 6 },
      ]);
    });

    test('pruneJournal deletes entries judged before a time; every effect and highest token stays', async () => {
      const { store, clock, record } = await setup();
      const t0 = clock.now();
      await record('a', 5, 3);
      clock.advance(10);
      expect(await record('a', 5, 6)).toBe('duplicate');
      clock.advance(10);
      await record('b', 2, 1);
      clock.advance(10);
      expect(await record('a', 5, 4)).toBe('fenced');
      const effects = await store.listEffects();

      expect(await store.pruneJournal(t0 + 20)).toBe(2);
      expect((await store.journal()).map(({ jobId, token, at }) => ({ jobId, token, at }))).toEqual([
        { jobId: 'b', token: 1, at: t0 + 20 },
        { jobId: 'a', token: 4, at: t0 + 30 },
      ]);
      expect(await store.pruneJournal(t0 + 20), 'nothing left before that time').toBe(0);
      expect(await store.listEffects()).toEqual(effects);
      expect(await store.totals()).toEqual({ effects: 2, qty: 7 });
      // The highest token (6) was raised by a pruned entry; it is kept with the effect.
      expect(await record('a', 5, 5)).toBe('fenced');
      expect(await record('a', 5, 6)).toBe('duplicate');
    });

    test('pruneJournal works in batches of batchSize, and stops between batches once its signal aborts', async () => {
      const { store, clock, record, onStatement } = await setup();
      for (let i = 0; i < 25; i++) await record(`j${i}`, 1, 1);
      clock.advance(1);
      const deletes: string[] = [];
      onStatement((sql) => {
        if (/^\s*delete/i.test(sql)) deletes.push(sql);
      });
      const stopped = new AbortController();
      stopped.abort();
      expect(await store.pruneJournal(clock.now(), { signal: stopped.signal })).toBe(0);
      expect((await store.journal()).length).toBe(25);
      expect(await store.pruneJournal(clock.now(), { batchSize: 10 })).toBe(25);
      expect(deletes.length, 'one DELETE per batch: 10, 10 and 5').toBe(3);
      expect(await store.journal()).toEqual([]);
      expect((await store.totals()).effects).toBe(25);
      await expect(store.pruneJournal(clock.now(), { batchSize: 0 })).rejects.toThrow(RangeError);
    });

    test('reset forgets effects and the journal', async () => {
      const { store, record } = await setup();
      await record('a', 5, 3);
      await store.reset();
      expect({
        effects: await store.listEffects(),
        totals: await store.totals(),
        journal: await store.journal(),
      }).toEqual({
        effects: [],
        totals: { effects: 0, qty: 0 },
        journal: [],
      });
      expect(await record('a', 6, 1)).toBe('applied');
    });

    test('racing writers on two handles: each job gets exactly one applied, and the journal replays', async () => {
      const { store, openAnother, clock } = await setup();
      const other = await openAnother();
      const stores = [store, other];
      const jobs = ['r1', 'r2', 'r3'];
      const attempts = jobs.flatMap((jobId) =>
        Array.from({ length: 12 }, (_, i) => ({ jobId, qty: 4, token: 1 + ((i * 7) % 5) })),
      );
      const outcomes = await Promise.all(
        attempts.map((attempt, i) =>
          recordEffect(stores[i % 2]!, attempt, clock).then((r) => ({
            jobId: attempt.jobId,
            outcome: r.judgement.outcome,
          })),
        ),
      );
      for (const jobId of jobs) {
        const applied = outcomes.filter((o) => o.jobId === jobId && o.outcome === 'applied').length;
        expect({ jobId, applied }).toEqual({ jobId, applied: 1 });
      }
      expect(await store.totals()).toEqual({ effects: 3, qty: 12 });
      const journal = await other.journal();
      expect(journal.length).toBe(attempts.length);
      const mismatches = replayJournal(journal).filter((row) => row.recorded !== row.replayed);
      expect(mismatches).toEqual([]);
    });
  });

  keyedEffectsSuite(name, factory);
}
