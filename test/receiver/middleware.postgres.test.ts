// fencedEffects on PostgreSQL with an apply that writes through `tx`: a deadlock or a
// serialization failure met by apply reruns the whole transaction (judgement, apply, record),
// past the store's retries it is `503 busy`, and any other failure is `500 apply_failed`.
import { describe, expect, test } from 'vitest';
import express from 'express';
import request from 'supertest';
import type { Knex } from 'knex';
import { openPostgres, parsePostgresUrl } from '../../platform/postgres.js';
import { fencedEffects, openPostgresEffectStore, type ApplyEffect } from '../../receiver/index.js';
import { fakeClock } from '../helpers/clock.js';
import { testSchema } from '../helpers/postgres.js';
import { capturedLogger, closeAfterTest, expectError, snapshot, until } from './setup.js';

const APPLY_FAILED_LOG = 'apply failed; the effect was not recorded';

/**
 * A downstream on PostgreSQL, in a schema of its own: `inventory` and `shipments` live next to
 * the receiver's tables, and `db` is a second pool on them for the test's own transactions.
 */
async function setup(apply: ApplyEffect<Knex.Transaction>, options: { retryBudgetMs?: number } = {}) {
  const { url } = testSchema('lh_rcv');
  const store = await openPostgresEffectStore({ connectionString: url, retryBudgetMs: options.retryBudgetMs });
  closeAfterTest(() => store.close());
  const db = openPostgres({ ...parsePostgresUrl(url), poolMax: 4 });
  closeAfterTest(() => db.destroy());
  await db.schema.createTable('inventory', (t) => {
    t.string('item').primary();
    t.integer('qty').notNullable();
  });
  await db.schema.createTable('shipments', (t) => {
    t.string('job_id').primary();
    t.integer('qty').notNullable();
  });
  await db('inventory').insert([
    { item: 'box', qty: 100 },
    { item: 'tape', qty: 100 },
  ]);

  const { logger, lines } = capturedLogger();
  const app = express();
  app.post('/ship', fencedEffects<Knex.Transaction>({ store, clock: fakeClock(2_000_000), logger, apply }));
  const ship = (jobId: string, qty: number, token: number) =>
    request(app).post('/ship').set('Fencing-Token', String(token)).send({ jobId, qty });
  const applyFailedLogs = () => lines.filter((line) => line.msg === APPLY_FAILED_LOG).map((line) => line.jobId);
  const inventory = async () =>
    Object.fromEntries(
      ((await db('inventory').select('item', 'qty')) as Array<{ item: string; qty: number }>).map((row) => [
        row.item,
        row.qty,
      ]),
    );
  const shipments = () => db('shipments').select('job_id', 'qty').orderBy('job_id');
  return { store, db, ship, applyFailedLogs, inventory, shipments };
}

/** Ships an order: takes a box, then tape, and records the shipment, all through `tx`. */
async function shipOrder(
  effect: { jobId: string; qty?: number },
  tx: Knex.Transaction,
  afterBox?: () => Promise<void>,
) {
  await tx('inventory')
    .where({ item: 'box' })
    .decrement('qty', effect.qty ?? 0);
  await afterBox?.();
  await tx('inventory').where({ item: 'tape' }).decrement('qty', 1);
  await tx('shipments').insert({ job_id: effect.jobId, qty: effect.qty });
}

describe('fencedEffects on PostgreSQL: what apply throws', () => {
  test('a deadlock in apply reruns the whole transaction: 201 applied, apply ran twice, one effect and one journal entry', async () => {
    let calls = 0;
    const errors: unknown[] = [];
    let rival!: Knex.Transaction;
    let rivalOutcome = 'not started';
    let db!: Knex;
    // The rival holds the tape and then wants a box, the opposite order to apply's. apply
    // starts waiting for the tape first, so its deadlock_timeout runs out first and its
    // transaction is the one PostgreSQL rolls back; the rival asks for the box 200 ms later,
    // well inside that 1 s, so the cycle is there when apply looks for it.
    const deadlockOnFirstCall = async (tx: Knex.Transaction) => {
      const { rows } = (await tx.raw('SELECT pg_backend_pid() AS pid')) as { rows: Array<{ pid: number }> };
      const pid = rows[0]!.pid;
      const tape = tx('inventory')
        .where({ item: 'tape' })
        .decrement('qty', 1)
        .then(
          () => new Error('apply got the tape while the rival held it'),
          (err: unknown) => err,
        );
      await until('apply waits for the rival', async () => {
        const waiting = (await db.raw('SELECT wait_event_type FROM pg_stat_activity WHERE pid = ?', [pid])) as {
          rows: Array<{ wait_event_type: string | null }>;
        };
        return waiting.rows[0]?.wait_event_type === 'Lock';
      });
      await new Promise((resolve) => setTimeout(resolve, 200));
      const box = rival('inventory')
        .where({ item: 'box' })
        .increment('qty', 10)
        .then(() => rival.commit())
        .then(
          () => void (rivalOutcome = 'committed'),
          async (err: unknown) => {
            rivalOutcome = `failed: ${String(err)}`;
            await rival.rollback().catch(() => undefined);
          },
        );
      const err = await tape;
      await box;
      throw err;
    };
    const downstream = await setup(async (effect, tx) => {
      calls += 1;
      try {
        await shipOrder(effect, tx, calls === 1 ? () => deadlockOnFirstCall(tx) : undefined);
      } catch (err) {
        errors.push(err);
        throw err;
      }
    });
    db = downstream.db;
    rival = await db.transaction();
    await rival('inventory').where({ item: 'tape' }).decrement('qty', 1);

    const res = await downstream.ship('o-1', 3, 1);
    expect(rivalOutcome, 'the rival transaction, not the deadlock victim').toBe('committed');
    expect({ status: res.status, body: res.body }).toMatchObject({ status: 201, body: { outcome: 'applied' } });
    expect(
      errors.map((err) => (err as { code?: unknown }).code),
      'SQLSTATEs apply met',
    ).toEqual(['40P01']);
    expect(calls, 'apply calls').toBe(2);
    expect(downstream.applyFailedLogs(), `no "${APPLY_FAILED_LOG}" line`).toEqual([]);
    const { effects, journal } = await snapshot(downstream.store);
    expect(effects.map((e) => [e.jobId, e.qty, e.token])).toEqual([['o-1', 3, 1]]);
    expect(journal.map((j) => [j.jobId, j.outcome])).toEqual([['o-1', 'applied']]);
    expect(await downstream.shipments()).toEqual([{ job_id: 'o-1', qty: 3 }]);
    // The rolled-back first call left nothing: one box order of 3, the rival's 10 boxes back,
    // one roll of tape each.
    expect(await downstream.inventory()).toEqual({ box: 100 - 3 + 10, tape: 98 });
  });

  test('a serialization failure in apply that outlasts the retries is 503 busy, and nothing is recorded', async () => {
    let calls = 0;
    const { ship, store, applyFailedLogs, shipments } = await setup(
      async (effect, tx) => {
        calls += 1;
        await shipOrder(effect, tx);
        await tx.raw(
          "DO $$ BEGIN RAISE EXCEPTION 'the ledger is being reconciled' USING ERRCODE = 'serialization_failure'; END $$",
        );
      },
      // Long enough for a second call on a loaded machine, short enough to give up soon.
      { retryBudgetMs: 1_000 },
    );
    const res = await ship('o-1', 3, 1);
    expectError(res, 503, 'busy');
    expect(calls, 'apply ran again while the retry budget lasted').toBeGreaterThan(1);
    expect(applyFailedLogs(), `no "${APPLY_FAILED_LOG}" line`).toEqual([]);
    expect(await snapshot(store)).toEqual({ effects: [], totals: { effects: 0, qty: 0 }, journal: [] });
    expect(await shipments()).toEqual([]);
  });

  test('a driver error that is not transient (a duplicate shipment) is 500 apply_failed, run once, logged once', async () => {
    let calls = 0;
    const { ship, store, db, applyFailedLogs, inventory } = await setup(async (effect, tx) => {
      calls += 1;
      await shipOrder(effect, tx);
    });
    await db('shipments').insert({ job_id: 'o-1', qty: 3 });
    const res = await ship('o-1', 3, 1);
    expectError(res, 500, 'apply_failed');
    expect(res.body.error.message).toBe(
      'The effect for job "o-1" could not be applied, so nothing was recorded; retry the request.',
    );
    expect(calls, 'apply calls').toBe(1);
    expect(applyFailedLogs(), `"${APPLY_FAILED_LOG}" lines, by job`).toEqual(['o-1']);
    expect(await snapshot(store)).toEqual({ effects: [], totals: { effects: 0, qty: 0 }, journal: [] });
    expect(await inventory()).toEqual({ box: 100, tape: 100 });
  });
});
