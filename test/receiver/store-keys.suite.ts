// The store conformance suite's part on several effects per job: keys recorded once each, bodies
// compared as JSON, the fence per job across keys, listings by job and key, racing writers on
// keys, and a database of the schema before keys migrated with its effects, tokens and journal.
import { describe, expect, test } from 'vitest';
import {
  createKnexEffectStore,
  migrateReceiver,
  receiverMigrationSource,
  recordEffect,
  RECEIVER_MIGRATIONS_TABLE,
  type EffectRequest,
  type EffectStore,
} from '../../receiver/index.js';
import { fakeClock } from '../helpers/clock.js';
import type { EffectStoreHarness } from './store.suite.js';
import { replayJournal } from './store.suite.js';

export function keyedEffectsSuite<Tx>(name: string, factory: () => Promise<EffectStoreHarness<Tx>>): void {
  describe(`receiver store, keys and bodies: ${name}`, () => {
    async function setup() {
      const clock = fakeClock(2_000_000);
      const harness = await factory();
      const record = (request: EffectRequest, store: EffectStore<Tx> = harness.store) =>
        recordEffect(store, request, clock).then((r) => r.judgement.outcome);
      return { ...harness, clock, record };
    }

    test('each (jobId, key) is recorded once, with its qty and body as given; totals add the qtys given', async () => {
      const { store, record, clock } = await setup();
      expect(await record({ jobId: 'a', qty: 3, token: 1 })).toBe('applied');
      clock.advance(1);
      expect(await record({ jobId: 'a', key: 'mail', body: { to: 'ann' }, token: 1 })).toBe('applied');
      expect(await record({ jobId: 'a', key: 'charge', qty: 7, body: [1, 'x', null], token: 1 })).toBe('applied');
      expect(await record({ jobId: 'a', key: 'mail', body: { to: 'ann' }, token: 2 })).toBe('duplicate');
      expect(await store.listEffects()).toEqual([
        { jobId: 'a', qty: 3, token: 1, appliedAt: 2_000_000 },
        { jobId: 'a', key: 'charge', qty: 7, body: [1, 'x', null], token: 1, appliedAt: 2_000_001 },
        { jobId: 'a', key: 'mail', body: { to: 'ann' }, token: 1, appliedAt: 2_000_001 },
      ]);
      expect(await store.getEffect('a')).toEqual({ jobId: 'a', qty: 3, token: 1, appliedAt: 2_000_000 });
      expect(await store.getEffect('a', 'mail')).toMatchObject({ key: 'mail', body: { to: 'ann' } });
      expect(await store.getEffect('a', 'nope')).toBeUndefined();
      expect(await store.totals()).toEqual({ effects: 3, qty: 10 });
      expect((await store.journal()).map(({ key, qty, body, outcome }) => ({ key, qty, body, outcome }))).toEqual([
        { key: undefined, qty: 3, body: undefined, outcome: 'applied' },
        { key: 'mail', qty: undefined, body: { to: 'ann' }, outcome: 'applied' },
        { key: 'charge', qty: 7, body: [1, 'x', null], outcome: 'applied' },
        { key: 'mail', qty: undefined, body: { to: 'ann' }, outcome: 'duplicate' },
      ]);
    });

    test('a body is compared with object key order ignored, kept sorted, and null is a body of its own', async () => {
      const { store, record } = await setup();
      const body = { z: 1, a: { y: [{ d: 1, c: 2 }], x: 'é' } };
      expect(await record({ jobId: 'b', key: 'k', body, token: 1 })).toBe('applied');
      const reordered = { a: { x: 'é', y: [{ c: 2, d: 1 }] }, z: 1 };
      expect(await record({ jobId: 'b', key: 'k', body: reordered, token: 1 })).toBe('duplicate');
      expect(JSON.stringify((await store.getEffect('b', 'k'))?.body)).toBe('{"a":{"x":"é","y":[{"c":2,"d":1}]},"z":1}');
      expect(await record({ jobId: 'b', key: 'k', body: { ...reordered, z: 2 }, token: 1 })).toBe('conflict');
      expect(await record({ jobId: 'b', key: 'k', token: 1, qty: 1 })).toBe('conflict');
      expect(await record({ jobId: 'b', key: 'n', body: null, token: 1 })).toBe('applied');
      expect(await store.getEffect('b', 'n')).toEqual({
        jobId: 'b',
        key: 'n',
        body: null,
        token: 1,
        appliedAt: 2_000_000,
      });
      expect(await record({ jobId: 'b', key: 'n', body: null, qty: 1, token: 1 }), 'a qty added').toBe('conflict');
      expect(await record({ jobId: 'b', key: 'q', qty: 2, token: 1 })).toBe('applied');
      expect(await record({ jobId: 'b', key: 'q', qty: 2, body: null, token: 1 }), 'a null body added').toBe(
        'conflict',
      );
    });

    test('the fence is per job: a token the job has passed, by any key, is fenced on every key and records nothing', async () => {
      const { store, record } = await setup();
      expect(await record({ jobId: 'j', key: 'charge', qty: 5, token: 4 })).toBe('applied');
      const before = { effects: await store.listEffects(), totals: await store.totals() };
      expect(await record({ jobId: 'j', key: 'charge', qty: 5, token: 3 })).toBe('fenced');
      expect(await record({ jobId: 'j', key: 'mail', body: 'hi', token: 3 }), 'a key the job never sent').toBe(
        'fenced',
      );
      expect(await record({ jobId: 'j', qty: 5, token: 1 }), 'the default effect').toBe('fenced');
      expect({ effects: await store.listEffects(), totals: await store.totals() }).toEqual(before);
      // A duplicate on one key raises the fence for the others.
      expect(await record({ jobId: 'j', key: 'charge', qty: 5, token: 6 })).toBe('duplicate');
      expect(await record({ jobId: 'j', key: 'mail', body: 'hi', token: 5 })).toBe('fenced');
      expect(await record({ jobId: 'j', key: 'mail', body: 'hi', token: 6 })).toBe('applied');
      // Another job is not fenced by this one.
      expect(await record({ jobId: 'other', key: 'mail', body: 'hi', token: 1 })).toBe('applied');
    });

    test('a conflict raises nothing: a lower token than the conflicting one still passes on another key', async () => {
      const { record } = await setup();
      expect(await record({ jobId: 'c', key: 'a', qty: 1, token: 3 })).toBe('applied');
      expect(await record({ jobId: 'c', key: 'a', qty: 2, token: 9 })).toBe('conflict');
      expect(await record({ jobId: 'c', key: 'b', qty: 1, token: 4 })).toBe('applied');
      expect(await record({ jobId: 'c', key: 'a', qty: 1, token: 4 })).toBe('duplicate');
      expect(await record({ jobId: 'c', key: 'b', qty: 1, token: 3 })).toBe('fenced');
    });

    test('each recorded judgement over several keys is the one judge gives, and the journal replays', async () => {
      const { store, record } = await setup();
      const requests: EffectRequest[] = [
        { jobId: 'r', key: 'x', qty: 1, token: 2 },
        { jobId: 'r', qty: 4, token: 2 },
        { jobId: 'r', key: 'y', body: { n: 1 }, token: 1 },
        { jobId: 'r', key: 'y', body: { n: 1 }, token: 5 },
        { jobId: 'r', key: 'x', qty: 2, token: 5 },
        { jobId: 'r', qty: 4, token: 4 },
        { jobId: 'r', key: 'z', qty: 1, token: 5 },
      ];
      const outcomes = [];
      for (const request of requests) outcomes.push(await record(request));
      expect(outcomes).toEqual(['applied', 'applied', 'fenced', 'applied', 'conflict', 'fenced', 'applied']);
      expect(replayJournal(await store.journal()).filter((row) => row.recorded !== row.replayed)).toEqual([]);
    });

    test('listings by job and key: pages resume inside a job, and jobId narrows to one job', async () => {
      const { store, record } = await setup();
      for (const [jobId, key] of [
        ['b', 'k2'],
        ['a', undefined],
        ['b', undefined],
        ['b', 'k1'],
        ['c', 'k1'],
      ] as const) {
        await record({ jobId, ...(key ? { key } : {}), qty: 1, token: 1 });
      }
      const ids = (effects: Array<{ jobId: string; key?: string }>) => effects.map((e) => `${e.jobId}/${e.key ?? ''}`);
      expect(ids(await store.listEffects())).toEqual(['a/', 'b/', 'b/k1', 'b/k2', 'c/k1']);
      expect(ids(await store.listEffects({ limit: 2 }))).toEqual(['a/', 'b/']);
      expect(ids(await store.listEffects({ after: { jobId: 'b' }, limit: 2 }))).toEqual(['b/k1', 'b/k2']);
      expect(ids(await store.listEffects({ after: 'b', limit: 2 })), 'a jobId alone is its default effect').toEqual([
        'b/k1',
        'b/k2',
      ]);
      expect(ids(await store.listEffects({ after: { jobId: 'b', key: 'k2' } }))).toEqual(['c/k1']);
      expect(ids(await store.listEffects({ jobId: 'b' }))).toEqual(['b/', 'b/k1', 'b/k2']);
      expect(ids(await store.listEffects({ jobId: 'b', after: { jobId: 'b', key: 'k1' } }))).toEqual(['b/k2']);
      expect(await store.listEffects({ jobId: 'nope' })).toEqual([]);
    });

    test('racing writers on two handles, several keys of one job: one applied per key, and the journal replays', async () => {
      const { store, openAnother, clock } = await setup();
      const stores = [store, await openAnother()];
      const keys = ['k1', 'k2', 'k3'];
      const attempts: EffectRequest[] = keys.flatMap((key) =>
        Array.from({ length: 10 }, (_, i) => ({ jobId: 'race', key, body: { key }, token: 1 + ((i * 3) % 4) })),
      );
      const outcomes = await Promise.all(
        attempts.map((attempt, i) =>
          recordEffect(stores[i % 2]!, attempt, clock).then((r) => ({
            key: attempt.key,
            outcome: r.judgement.outcome,
          })),
        ),
      );
      for (const key of keys) {
        const applied = outcomes.filter((o) => o.key === key && o.outcome === 'applied').length;
        expect({ key, applied }).toEqual({ key, applied: 1 });
      }
      const journal = await stores[1]!.journal();
      expect(journal.length).toBe(attempts.length);
      expect(replayJournal(journal).filter((row) => row.recorded !== row.replayed)).toEqual([]);
      // Token 4 went through on some key, so 3 is fenced on every key now.
      expect(await recordEffect(store, { jobId: 'race', key: 'k9', qty: 1, token: 3 }, clock)).toMatchObject({
        judgement: { outcome: 'fenced', state: { highestToken: 4 } },
      });
    });

    test('reset forgets keyed effects and the jobs highest tokens', async () => {
      const { store, record } = await setup();
      await record({ jobId: 'a', key: 'k', qty: 1, token: 9 });
      await store.reset();
      expect(await store.listEffects()).toEqual([]);
      expect(await record({ jobId: 'a', key: 'other', qty: 1, token: 1 })).toBe('applied');
    });

    test('a database of the schema before keys keeps its effects, highest tokens and journal, seq counter included', async () => {
      const { emptyDatabase, clock } = await setup();
      const { knex, dialect } = await emptyDatabase();
      const before = (await receiverMigrationSource.getMigrations([])).filter((m) => m.name < '006');
      await knex.migrate.latest({
        tableName: RECEIVER_MIGRATIONS_TABLE,
        migrationSource: { ...receiverMigrationSource, getMigrations: async () => before },
      });
      await knex('receiver_effects').insert([
        { job_id: 'old-1', qty: 3, token: 2, applied_at: 100, highest_token: 5 },
        { job_id: 'old-2', qty: 4, token: 1, applied_at: 200, highest_token: 1 },
      ]);
      await knex('receiver_journal').insert([
        { job_id: 'old-1', qty: 3, token: 2, outcome: 'applied', at: 100 },
        { job_id: 'gone', qty: 1, token: 1, outcome: 'applied', at: 150 },
      ]);
      await knex('receiver_journal').where({ job_id: 'gone' }).delete();
      await knex('receiver_totals').update({ effects: 2, qty: 7 });

      await migrateReceiver(knex);
      const store = createKnexEffectStore({ knex, dialect });
      expect(await store.listEffects()).toEqual([
        { jobId: 'old-1', qty: 3, token: 2, appliedAt: 100 },
        { jobId: 'old-2', qty: 4, token: 1, appliedAt: 200 },
      ]);
      expect(await store.totals()).toEqual({ effects: 2, qty: 7 });
      const record = (request: EffectRequest) => recordEffect(store, request, clock).then((r) => r.judgement.outcome);
      expect(await record({ jobId: 'old-1', qty: 3, token: 4 }), 'the highest token (5) was kept').toBe('fenced');
      expect(await record({ jobId: 'old-1', key: 'mail', body: 'x', token: 4 })).toBe('fenced');
      expect(await record({ jobId: 'old-1', qty: 3, token: 5 })).toBe('duplicate');
      expect(await record({ jobId: 'old-2', qty: 5, token: 1 })).toBe('conflict');
      const journal = await store.journal();
      expect(journal.map(({ seq, jobId, outcome }) => ({ seq, jobId, outcome }))).toEqual([
        { seq: 1, jobId: 'old-1', outcome: 'applied' },
        // seq 2 was taken by the deleted entry and is not reused.
        { seq: 3, jobId: 'old-1', outcome: 'fenced' },
        { seq: 4, jobId: 'old-1', outcome: 'fenced' },
        { seq: 5, jobId: 'old-1', outcome: 'duplicate' },
        { seq: 6, jobId: 'old-2', outcome: 'conflict' },
      ]);
      await migrateReceiver(knex);
      expect((await store.listEffects()).length, 'migrating again changes nothing').toBe(2);
    });
  });
}
