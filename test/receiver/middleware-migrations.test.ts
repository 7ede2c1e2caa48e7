// A downstream's own tables beside the receiver's: migrateDownstream runs the embedder's
// migrations once, on SQLite and PostgreSQL, and fencedEffects' apply writes to them in the
// recording transaction.
import express from 'express';
import request from 'supertest';
import { describe, expect, test } from 'vitest';
import type { Knex } from 'knex';
import {
  fencedEffects,
  migrateDownstream,
  openPostgresEffectStore,
  type DownstreamMigration,
  type KnexEffectStore,
} from '../../receiver/index.js';
import { testSchema } from '../helpers/postgres.js';
import { closeAfterTest, sqliteStore } from './setup.js';

const shipments: DownstreamMigration = {
  name: '001_shipments',
  up: (knex) =>
    knex.schema.createTable('shipments', (t) => {
      t.string('job_id').primary();
      t.integer('qty').notNullable();
    }),
};

async function shipThrough(store: KnexEffectStore) {
  const app = express();
  app.post(
    '/ship',
    fencedEffects({
      store,
      apply: async (effect, tx: Knex.Transaction) => {
        await tx('shipments').insert({ job_id: effect.jobId, qty: effect.qty });
      },
    }),
  );
  const ship = (jobId: string, qty: number, token: number) =>
    request(app).post('/ship').set('Fencing-Token', String(token)).type('json').send(JSON.stringify({ jobId, qty }));
  expect((await ship('a', 3, 1)).status).toBe(201);
  expect((await ship('a', 3, 1)).status).toBe(200);
  expect((await ship('a', 3, 2)).status).toBe(200);
  expect((await ship('a', 3, 1)).status).toBe(409);
  expect(await store.knex('shipments').select('job_id', 'qty')).toEqual([{ job_id: 'a', qty: 3 }]);
}

describe('migrateDownstream', () => {
  test('SQLite: runs each migration once, then apply writes to its table', async () => {
    const { store } = await sqliteStore();
    const knex = (store as KnexEffectStore).knex;
    await migrateDownstream(store as KnexEffectStore, [shipments]);
    await migrateDownstream(store as KnexEffectStore, [shipments]);
    expect((await knex('downstream_migrations').select('name')).map((r) => r.name)).toEqual(['001_shipments']);
    await shipThrough(store as KnexEffectStore);
  });

  test('a later migration runs on the next start; two with one name are refused', async () => {
    const { store } = await sqliteStore();
    const kept = store as KnexEffectStore;
    await migrateDownstream(kept, [shipments], { tableName: 'shipping_migrations' });
    const carrier: DownstreamMigration = {
      name: '002_carrier',
      up: (knex) => knex.schema.alterTable('shipments', (t) => t.string('carrier')),
    };
    await migrateDownstream(kept, [shipments, carrier], { tableName: 'shipping_migrations' });
    expect((await kept.knex('shipping_migrations').select('name')).map((r) => r.name)).toEqual([
      '001_shipments',
      '002_carrier',
    ]);
    await expect(migrateDownstream(kept, [shipments, shipments])).rejects.toThrow(/named "001_shipments"/);
  });

  test('PostgreSQL: two stores starting together migrate once', async () => {
    const { url } = testSchema('lh_rcv');
    const stores = await Promise.all([1, 2].map(() => openPostgresEffectStore({ connectionString: url })));
    for (const store of stores) closeAfterTest(() => store.close());
    await Promise.all(stores.map((store) => migrateDownstream(store, [shipments])));
    expect((await stores[0]!.knex('downstream_migrations').select('name')).map((r) => r.name)).toEqual([
      '001_shipments',
    ]);
    await shipThrough(stores[1]!);
  });
});
