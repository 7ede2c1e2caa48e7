// fencedEffects adopted by a downstream of its own: its effect is written in the recording
// transaction, exactly once, and a failing effect leaves no record behind.
import { describe, expect, test } from 'vitest';
import express from 'express';
import request from 'supertest';
import type { Knex } from 'knex';
import { openSqlite } from '../../queue/sqlite.js';
import { fencedEffects } from '../../receiver/index.js';
import { fakeClock } from '../helpers/clock.js';
import { expectError, snapshot, sqliteStore } from './setup.js';

/** A downstream that ships orders, keeping them in the receiver's database. */
async function setup(options: { failFor?: string } = {}) {
  const clock = fakeClock(2_000_000);
  const { store, filename } = await sqliteStore();
  const shipments = async (): Promise<Array<{ job_id: string; qty: number }>> => {
    const knex = openSqlite({ filename });
    try {
      return (await knex('shipments').select('job_id', 'qty').orderBy('job_id')) as Array<{ job_id: string; qty: number }>;
    } finally {
      await knex.destroy();
    }
  };
  const app = express();
  app.post(
    '/ship',
    fencedEffects<Knex.Transaction>({
      store,
      clock,
      apply: async (effect, tx) => {
        if (!(await tx.schema.hasTable('shipments'))) {
          await tx.schema.createTable('shipments', (t) => {
            t.string('job_id').primary();
            t.integer('qty');
          });
        }
        await tx('shipments').insert({ job_id: effect.jobId, qty: effect.qty });
        if (effect.jobId === options.failFor) throw new Error('carrier refused the parcel');
      },
    }),
  );
  const ship = (jobId: string, qty: number, token: number) =>
    request(app).post('/ship').set('Fencing-Token', String(token)).send({ jobId, qty });
  return { app, store, ship, shipments };
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

  test('a throwing apply answers 500 apply_failed and rolls back the record and its own writes', async () => {
    const { ship, store, shipments } = await setup({ failFor: 'o-bad' });
    expect((await ship('o-1', 1, 1)).status).toBe(201);
    const before = await snapshot(store);
    expectError(await ship('o-bad', 1, 1), 500, 'apply_failed');
    expect(await snapshot(store)).toEqual(before);
    expect(await shipments()).toEqual([{ job_id: 'o-1', qty: 1 }]);
  });

  test('mounted behind a JSON parser it refuses loudly instead of verifying a re-serialised body', async () => {
    const { store } = await sqliteStore();
    const app = express();
    app.use(express.json());
    app.post('/ship', fencedEffects({ store }));
    const res = await request(app).post('/ship').set('Fencing-Token', '1').send({ jobId: 'a', qty: 1 });
    expectError(res, 500, 'internal_error');
    expect(await store.totals()).toEqual({ effects: 0, qty: 0 });
  });
});
