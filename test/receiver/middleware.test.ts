// fencedEffects adopted by a downstream of its own: its effect is written in the recording
// transaction, exactly once, a failing effect leaves no record behind, and a busy database met
// by the effect runs the transaction again instead of failing the request.
import { describe, expect, test, vi } from 'vitest';
import express from 'express';
import request from 'supertest';
import { join } from 'node:path';
import type { Knex } from 'knex';
import { openSqlite } from '../../platform/sqlite.js';
import { fencedEffects, ReceiverError, type Effect, type EffectStore } from '../../receiver/index.js';
import { fakeClock } from '../helpers/clock.js';
import { holdWriteLock } from '../helpers/sqlite-lock.js';
import { tempDir } from '../helpers/tmp.js';
import { capturedLogger, closeAfterTest, expectError, snapshot, sqliteStore, until } from './setup.js';

const APPLY_FAILED_LOG = 'apply failed; the effect was not recorded';

interface SetupOptions {
  /** Makes apply throw for this job, after the shipment was written through `tx`. */
  failFor?: string;
  /** What apply throws for `failFor`; a plain Error by default. */
  failWith?: () => unknown;
  /** Runs first in every apply call, with the call's number for that job (from 1). */
  before?: (effect: Effect, call: number) => Promise<void>;
  /** Lets a test wrap the store the router is given. */
  wrapStore?: (store: EffectStore<Knex.Transaction>) => EffectStore<Knex.Transaction>;
}

/** A downstream that ships orders, keeping them in the receiver's database. */
async function setup(options: SetupOptions = {}) {
  const clock = fakeClock(2_000_000);
  const { store, filename } = await sqliteStore();
  const { logger, lines } = capturedLogger();
  /** apply calls per job, in call order. */
  const calls: Record<string, number> = {};
  const shipments = async (): Promise<Array<{ job_id: string; qty: number }>> => {
    const db = openSqlite({ filename });
    const knex = db.knex;
    try {
      return (await knex('shipments').select('job_id', 'qty').orderBy('job_id')) as Array<{
        job_id: string;
        qty: number;
      }>;
    } finally {
      await db.close();
    }
  };
  const app = express();
  app.post(
    '/ship',
    fencedEffects<Knex.Transaction>({
      store: options.wrapStore ? options.wrapStore(store) : store,
      clock,
      logger,
      apply: async (effect, tx) => {
        calls[effect.jobId] = (calls[effect.jobId] ?? 0) + 1;
        await options.before?.(effect, calls[effect.jobId]!);
        if (!(await tx.schema.hasTable('shipments'))) {
          await tx.schema.createTable('shipments', (t) => {
            t.string('job_id').primary();
            t.integer('qty');
          });
        }
        await tx('shipments').insert({ job_id: effect.jobId, qty: effect.qty });
        if (effect.jobId === options.failFor) throw options.failWith?.() ?? new Error('carrier refused the parcel');
      },
    }),
  );
  const ship = (jobId: string, qty: number, token: number) =>
    request(app).post('/ship').set('Fencing-Token', String(token)).send({ jobId, qty });
  const applyFailedLogs = () => lines.filter((line) => line.msg === APPLY_FAILED_LOG).map((line) => line.jobId);
  /** Every error line (level 50 and up), by message. */
  const errorLogs = () => lines.filter((line) => Number(line.level) >= 50).map((line) => line.msg);
  return { app, store, ship, shipments, calls, applyFailedLogs, errorLogs };
}

describe('fencedEffects in a downstream app', () => {
  test('applies once; duplicates, fenced and conflicts do not reach apply', async () => {
    const { ship, shipments } = await setup();
    expect((await ship('o-1', 3, 2)).status).toBe(201);
    expect((await ship('o-1', 3, 2)).status).toBe(200);
    expectError(await ship('o-1', 3, 1), 409, 'fenced');
    expectError(await ship('o-1', 4, 2), 422, 'conflict');
    expect(await shipments()).toEqual([{ job_id: 'o-1', qty: 3 }]);
  });

  test('a throwing apply answers 500 apply_failed once, not retried, and rolls back the record and its own writes', async () => {
    const { ship, store, shipments, calls, applyFailedLogs, errorLogs } = await setup({ failFor: 'o-bad' });
    expect((await ship('o-1', 1, 1)).status).toBe(201);
    const before = await snapshot(store);
    const res = await ship('o-bad', 1, 1);
    expectError(res, 500, 'apply_failed');
    expect(res.body.error.message).toBe(
      'The effect for job "o-bad" could not be applied, so nothing was recorded; retry the request.',
    );
    expect(calls, 'apply calls per job').toEqual({ 'o-1': 1, 'o-bad': 1 });
    expect(applyFailedLogs(), `"${APPLY_FAILED_LOG}" lines, by job`).toEqual(['o-bad']);
    expect(errorLogs(), 'error lines: the failure is logged once, not again by the error middleware').toEqual([
      APPLY_FAILED_LOG,
    ]);
    expect(await snapshot(store)).toEqual(before);
    expect(await shipments()).toEqual([{ job_id: 'o-1', qty: 1 }]);
  });

  test('a ReceiverError thrown by apply is the answer as thrown, not retried even when it reads like SQLITE_BUSY', async () => {
    const message = 'The carrier database is locked for the night; retry the request in the morning.';
    const { ship, store, shipments, calls, applyFailedLogs } = await setup({
      failFor: 'o-bad',
      failWith: () => new ReceiverError('busy', message),
    });
    expect((await ship('o-1', 1, 1)).status).toBe(201);
    const before = await snapshot(store);
    const res = await ship('o-bad', 1, 1);
    expectError(res, 503, 'busy');
    expect(res.body.error.message).toBe(message);
    expect(calls, 'apply calls per job').toEqual({ 'o-1': 1, 'o-bad': 1 });
    expect(applyFailedLogs(), `no "${APPLY_FAILED_LOG}" line`).toEqual([]);
    expect(await snapshot(store)).toEqual(before);
    expect(await shipments()).toEqual([{ job_id: 'o-1', qty: 1 }]);
  });

  // Through `tx` SQLite cannot be busy inside apply: BEGIN IMMEDIATE already took the write lock
  // of every file the transaction can write, attached ones included. A genuine SQLITE_BUSY in
  // apply comes from a handle of its own, here on the carrier's database, which another
  // connection holds locked for the first call.
  test('an apply that meets SQLITE_BUSY runs the whole transaction again and is applied once', async () => {
    const carrierFile = join(tempDir('leasehold-carrier-'), 'carrier.sqlite');
    const carrierDb = openSqlite({ filename: carrierFile, busyTimeoutMs: 20 });
    closeAfterTest(() => carrierDb.close());
    const carrier = carrierDb.knex;
    await carrier.schema.createTable('labels', (t) => t.string('job_id'));
    const release = await holdWriteLock(carrierFile);
    const errors: unknown[] = [];
    const { ship, store, shipments, calls, applyFailedLogs } = await setup({
      before: async (effect, call) => {
        try {
          await carrier('labels').insert({ job_id: effect.jobId });
        } catch (err) {
          errors.push(err);
          if (call === 1) await release();
          throw err;
        }
      },
    });

    const res = await ship('o-1', 2, 1);
    expect({ status: res.status, body: res.body }).toMatchObject({ status: 201, body: { outcome: 'applied' } });
    expect(
      errors.map((err) => (err as { code?: unknown }).code),
      'what the carrier answered apply',
    ).toEqual(['SQLITE_BUSY']);
    expect(calls, 'apply calls per job').toEqual({ 'o-1': 2 });
    expect(applyFailedLogs(), `no "${APPLY_FAILED_LOG}" line`).toEqual([]);
    const { effects, journal } = await snapshot(store);
    expect(effects.map((e) => [e.jobId, e.qty, e.token])).toEqual([['o-1', 2, 1]]);
    expect(journal.map((j) => [j.jobId, j.outcome])).toEqual([['o-1', 'applied']]);
    expect(await shipments()).toEqual([{ job_id: 'o-1', qty: 2 }]);
    expect(await carrier('labels').select('job_id')).toEqual([{ job_id: 'o-1' }]);
  });

  test('in a group commit a failing apply fails its own request only; the others are rerun alone and applied', async () => {
    let submitted = 0;
    let openGate!: () => void;
    const gate = new Promise<void>((resolve) => (openGate = resolve));
    const { ship, store, shipments, calls, applyFailedLogs } = await setup({
      failFor: 'o-bad',
      // The first write holds the transaction open until the others are queued behind it, so
      // those three share the next one, in the order they were sent.
      before: (effect) => (effect.jobId === 'o-first' ? gate : Promise.resolve()),
      wrapStore: (inner) => ({
        ...inner,
        record: (request, clock, apply) => {
          submitted += 1;
          return inner.record(request, clock, apply);
        },
      }),
    });

    const send = (jobId: string) => ship(jobId, 1, 1).then((res) => res);
    const first = send('o-first');
    await until('apply runs for o-first', () => calls['o-first'] === 1);
    const rest: Array<ReturnType<typeof send>> = [];
    for (const jobId of ['o-2', 'o-bad', 'o-4']) {
      rest.push(send(jobId));
      const expected = rest.length + 1;
      await until(`${expected} transactions are submitted`, () => submitted === expected);
    }
    openGate();
    const answers = await Promise.all([first, ...rest]);

    expect(answers.map((res) => [res.status, res.body.outcome ?? res.body.error?.code])).toEqual([
      [201, 'applied'],
      [201, 'applied'],
      [500, 'apply_failed'],
      [201, 'applied'],
    ]);
    // o-2 and o-bad ran in the shared transaction that o-bad failed, then once more alone;
    // o-4 came after o-bad in it, so it ran alone only.
    expect(calls, 'apply calls per job').toEqual({ 'o-first': 1, 'o-2': 2, 'o-bad': 2, 'o-4': 1 });
    expect(applyFailedLogs(), `"${APPLY_FAILED_LOG}" lines, by job`).toEqual(['o-bad']);
    const { effects, journal } = await snapshot(store);
    expect(effects.map((e) => e.jobId).sort()).toEqual(['o-2', 'o-4', 'o-first']);
    expect(journal.map((j) => [j.jobId, j.outcome])).toEqual([
      ['o-first', 'applied'],
      ['o-2', 'applied'],
      ['o-4', 'applied'],
    ]);
    expect((await shipments()).map((s) => s.job_id)).toEqual(['o-2', 'o-4', 'o-first']);
  });

  // Without a logger of its own the cause goes to stderr: the 500's message says it is in the log.
  test('mounted behind a JSON parser it refuses loudly instead of verifying a re-serialised body, and says why on stderr', async () => {
    const { store } = await sqliteStore();
    const app = express();
    app.use(express.json());
    app.post('/ship', fencedEffects({ store }));
    const written: string[] = [];
    const stderr = vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
      written.push(String(chunk));
      return true;
    });
    let res;
    try {
      res = await request(app).post('/ship').set('Fencing-Token', '1').send({ jobId: 'a', qty: 1 });
    } finally {
      stderr.mockRestore();
    }
    expectError(res, 500, 'internal');
    expect(await store.totals()).toEqual({ effects: 0, qty: 0 });
    const lines = written.flatMap((chunk) => chunk.trim().split('\n')).map((line) => JSON.parse(line));
    expect(lines.map((line) => [line.level, line.err?.message])).toEqual([
      [50, 'fencedEffects needs the raw request body: mount it before any body parser (e.g. express.json()).'],
    ]);
  });
});
