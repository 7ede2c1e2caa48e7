// Choosing and opening PostgreSQL: URL parsing, schema names, password redaction, and what a
// caller sees when the database cannot be reached (503, not 500).
import { afterEach, describe, expect, test } from 'vitest';
import request from 'supertest';
import { existsSync } from 'node:fs';
import {
  createQueueApp,
  openPostgresQueueStore,
  openQueueStore,
  QueueError,
  type QueueStore,
} from '../../queue/index.js';
import { KnexQueueStore } from '../../queue/knex-store.js';
import { postgresDialect } from '../../queue/postgres-store.js';
import { isPostgresUrl, openPostgres, parsePostgresUrl, redactDb } from '../../platform/postgres.js';
import { createReceiverApp, createKnexEffectStore, postgresEffectDialect } from '../../receiver/index.js';
import { holdJobRow, testSchema } from '../helpers/postgres.js';
import { newJobInput } from './store.suite.js';

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((close) => close()));
});

/** Nothing listens on port 1: every query fails with ECONNREFUSED, as when the server is down. */
const UNREACHABLE = 'postgres://postgres@127.0.0.1:1/test';

describe('postgres URLs', () => {
  test('postgres:// and postgresql:// select PostgreSQL; ?schema= is taken off and the rest kept', () => {
    expect([
      isPostgresUrl('postgres://h/db'),
      isPostgresUrl('postgresql://h/db'),
      isPostgresUrl('./data/q.sqlite'),
    ]).toEqual([true, true, false]);
    expect(parsePostgresUrl('postgres://u:p@h:5433/db?schema=lh_1&sslmode=disable')).toEqual({
      connectionString: 'postgres://u:p@h:5433/db?sslmode=disable',
      schema: 'lh_1',
    });
    expect(parsePostgresUrl('postgres://h/db')).toEqual({ connectionString: 'postgres://h/db', schema: undefined });
  });

  test('a schema name that is not a plain identifier is refused with a reason', () => {
    for (const bad of ['a-b', '1abc', 'x"; DROP TABLE t; --', 'a'.repeat(64)]) {
      expect(() => parsePostgresUrl(`postgres://h/db?schema=${encodeURIComponent(bad)}`), bad).toThrow(
        /plain identifier/,
      );
    }
  });

  test('passwords never reach logs', () => {
    expect(redactDb('postgres://app:s3cret@db.internal:5432/jobs?schema=q')).toBe(
      'postgres://app:***@db.internal:5432/jobs?schema=q',
    );
    expect(redactDb('./data/queue.sqlite')).toBe('./data/queue.sqlite');
  });

  test('a password given as a query parameter, which pg reads as the password, is masked too', () => {
    expect(
      [
        'postgres://app@db.internal/jobs?password=s3cret&schema=q',
        'postgresql://app:pw1@db.internal/jobs?sslmode=require&PASSWORD=s3cret&sslpassword=k3y',
        'postgres://app@db.internal/jobs?schema=q&password=',
      ].map(redactDb),
    ).toEqual([
      'postgres://app@db.internal/jobs?password=***&schema=q',
      'postgresql://app:***@db.internal/jobs?sslmode=require&PASSWORD=***&sslpassword=***',
      'postgres://app@db.internal/jobs?schema=q&password=***',
    ]);
    // One the URL parser refuses (a bad port) is masked by shape.
    expect(redactDb('postgres://app:s3cret@db:99999/jobs?password=s3cret#x')).toBe(
      'postgres://***@db:99999/jobs?password=***#x',
    );
    // A password with an @, a ? or a # of its own, left unencoded: nothing of it is shown.
    expect(
      ['postgres://app:p@ss@db:99999/jobs', 'postgres://app:p?ss@db:99999/jobs', 'postgres://app:p#ss@db:99999/x'].map(
        redactDb,
      ),
    ).toEqual(['postgres://***@db:99999/jobs', 'postgres://***@db:99999/jobs', 'postgres://***@db:99999/x']);
  });

  test('a URL that cannot be read, or gives the schema twice, is refused saying how to write it', () => {
    expect(() => parsePostgresUrl('postgres://app:s3cret@db:99999/jobs')).toThrow(
      new RangeError(
        '"postgres://***@db:99999/jobs" is not a URL that can be read: write it as postgres://USER:PASSWORD@HOST:PORT/DATABASE, with a port up to 65535 and any of @ : / ? # % or a space in the user or password percent-encoded (@ as %40).',
      ),
    );
    expect(() => parsePostgresUrl('postgres://h/db?schema=a&schema=b')).toThrow(
      new RangeError('"postgres://h/db?schema=a&schema=b" gives ?schema= 2 times ("a", "b"); give it once.'),
    );
  });

  test('a URL of another database is refused, not taken for a SQLite file name', async () => {
    await expect(openQueueStore({ db: 'mysql://u:pw@h/db' })).rejects.toThrow(
      'Unsupported database URL "mysql://u:***@h/db"',
    );
    expect(existsSync('mysql:')).toBe(false);
  });
});

describe('postgres unreachable', () => {
  test('opening a store fails, and says so', async () => {
    await expect(openQueueStore({ db: UNREACHABLE })).rejects.toMatchObject({ code: 'ECONNREFUSED' });
  });

  test('the queue answers 503 queue_unavailable when its database goes away', async () => {
    const gone: QueueStore = new KnexQueueStore(
      openPostgres(parsePostgresUrl(UNREACHABLE)),
      postgresDialect({ schema: undefined, retryBudgetMs: 100 }),
    );
    closers.push(() => gone.close());
    const res = await request(createQueueApp({ store: gone }))
      .post('/claims')
      .send({ owner: 'w1' });
    expect({ status: res.status, code: res.body?.error?.code }).toEqual({ status: 503, code: 'queue_unavailable' });
    expect(res.body.error.message).toContain('PostgreSQL');
  });

  test('the receiver answers 503 busy when its database goes away', async () => {
    const store = createKnexEffectStore({
      knex: openPostgres(parsePostgresUrl(UNREACHABLE)),
      dialect: postgresEffectDialect(100),
    });
    closers.push(() => store.close());
    const res = await request(createReceiverApp({ store }))
      .post('/effects')
      .set('Fencing-Token', '1')
      .send({ jobId: 'a', qty: 1 });
    expect({ status: res.status, code: res.body?.error?.code }).toEqual({ status: 503, code: 'busy' });
  });
});

describe('postgres: a fenced write judges the clock after its row lock', () => {
  test('a finish that waits for another transaction past leaseUntil is refused, lease_expired', async () => {
    const { url, schema } = testSchema('lh_lockwait');
    // The server's clock, as in production: `now` is read by the database.
    const store = await openPostgresQueueStore({ connectionString: url });
    closers.push(() => store.close());
    await store.enqueue(newJobInput({ id: 'held' }));
    const lease = await store.claim('w1', 400);
    expect(lease?.id).toBe('held');
    // A second connection holds the row, in a transaction, past the lease's end.
    const holder = await holdJobRow(schema, 'held');
    closers.push(() => holder.release());
    const finish = store.finish('held', lease!, 'late').catch((err: unknown) => err);
    // The finish is sent while its lease is still valid, and waits for the row.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(Date.now(), 'the finish was sent before leaseUntil').toBeLessThan(lease!.leaseUntil);
    while (Date.now() <= lease!.leaseUntil + 200) await new Promise((resolve) => setTimeout(resolve, 50));
    await holder.release();
    const refused = await finish;
    expect(refused).toBeInstanceOf(QueueError);
    expect(refused).toMatchObject({ code: 'stale_lease', details: { reason: 'lease_expired' } });
    expect(await store.get('held')).toMatchObject({ status: 'leased', token: lease!.token });
  });
});
