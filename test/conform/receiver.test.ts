// The conformance suite against leasehold's own downstreams: the receiver on SQLite and on
// PostgreSQL, and a service of its own built on fencedEffects, whose apply writes to a table of
// the service. Each passes every case, the signature cases included.
import { join } from 'node:path';
import express from 'express';
import { describe, expect, test } from 'vitest';
import { conform, formatCase, type ConformReport } from '../../conform/index.js';
import { listen } from '../../platform/listen.js';
import {
  fencedEffects,
  migrateDownstream,
  openSqliteEffectStore,
  startReceiver,
  type Clock,
  type EffectRequest,
} from '../../receiver/index.js';
import { testSchema } from '../helpers/postgres.js';
import { tempDir } from '../helpers/tmp.js';
import { closeAfterTest } from '../gateway/setup.js';

const SECRET = 'conform-secret';

function expectAllPassed(report: ConformReport): void {
  const shown = report.cases.map(formatCase).join('\n');
  expect({ failed: report.failed, skipped: report.cases.filter((c) => c.status === 'skipped').length }, shown).toEqual({
    failed: 0,
    skipped: 0,
  });
  // The thirteen cases of the protocol and the batch extension's, which leasehold offers.
  expect(report.passed, shown).toBe(16);
}

describe('leasehold conform against leasehold downstreams', () => {
  test('the receiver on SQLite', async () => {
    const receiver = await startReceiver({
      db: join(tempDir('leasehold-conform-'), 'receiver.sqlite'),
      secret: SECRET,
    });
    closeAfterTest(() => receiver.close());
    expectAllPassed(await conform({ url: `${receiver.url}/effects`, secret: SECRET }));
  });

  test('the receiver on PostgreSQL', async () => {
    const { url } = testSchema('lh_conform');
    const receiver = await startReceiver({ db: url, secret: SECRET });
    closeAfterTest(() => receiver.close());
    expectAllPassed(await conform({ url: `${receiver.url}/effects`, secret: SECRET }));
  });

  test('a fencedEffects service: every case passes, and its own table has one row per effect it applied', async () => {
    const store = await openSqliteEffectStore({ filename: join(tempDir('leasehold-conform-'), 'billing.sqlite') });
    closeAfterTest(() => store.close());
    await migrateDownstream(store, [
      {
        name: '001_charges',
        up: (knex) =>
          knex.schema.createTable('charges', (t) => {
            t.string('job_id').notNullable();
            t.string('key').notNullable();
            t.integer('qty');
            t.text('body');
            t.primary(['job_id', 'key']);
          }),
      },
    ]);
    const app = express();
    app.post(
      '/billing/effects',
      fencedEffects({
        store,
        secret: SECRET,
        apply: async (effect, tx) => {
          await tx('charges').insert({
            job_id: effect.jobId,
            key: effect.key ?? '',
            qty: effect.qty ?? null,
            body: effect.body === undefined ? null : JSON.stringify(effect.body),
          });
        },
      }),
    );
    const server = await listen(app, '127.0.0.1', 0);
    closeAfterTest(() => server.close());

    const report = await conform({ url: `${server.url}/billing/effects`, secret: SECRET });
    expectAllPassed(report);
    const charges = await store.knex('charges').select('job_id', 'key');
    const effects = await store.knex('receiver_effects').count({ n: '*' }).first();
    expect(charges.length).toBe(Number(effects?.n));
    expect(new Set(charges.map((c) => `${c.job_id}/${c.key}`)).size).toBe(charges.length);
  });

  test('a downstream whose batches judge a job out of order fails the batch case, and only that one', async () => {
    const store = await openSqliteEffectStore({ filename: join(tempDir('leasehold-conform-'), 'reversed.sqlite') });
    closeAfterTest(() => store.close());
    // Judges a batch's effects last to first: the second of one job no longer sees the first's token.
    const reversed = {
      ...store,
      recordMany: async (requests: readonly EffectRequest[], clock: Clock) =>
        (await store.recordMany([...requests].reverse(), clock)).reverse(),
    };
    const app = express();
    app.post('/effects', fencedEffects({ store: reversed }));
    const server = await listen(app, '127.0.0.1', 0);
    closeAfterTest(() => server.close());
    const report = await conform({ url: `${server.url}/effects` });
    const failed = report.cases.filter((c) => c.status === 'failed');
    expect(
      failed.map((c) => c.name),
      report.cases.map(formatCase).join('\n'),
    ).toEqual(['a batch, when offered, is judged effect by effect as single requests are']);
    expect(failed[0]!.detail).toMatch(/expected statuses 200, 409, 409, 422, 201, 409, 400, got /);
  });
});
