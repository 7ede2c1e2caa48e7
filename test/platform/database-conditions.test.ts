// A database that is full, read-only, or has more writes waiting than the store takes: writes
// are 503 with a sentence that says which, reads go on, and the next write after the condition
// clears succeeds. At start, a file that is not a database, a --db under a regular file, or a
// read-only database is a one-line reason, never a stack.
//
// How each condition is made, honestly and without root tricks: a full disk is SQLite's own
// limit on the file (PRAGMA max_page_count, which fails writes with SQLITE_FULL exactly as a full
// disk does); a read-only file is PRAGMA query_only on the store's one connection (SQLITE_READONLY,
// the code a read-only file or mount gives); a read-only PostgreSQL is a session with
// default_transaction_read_only (25006, what a standby answers). File modes cannot serve: the
// tests may run as root, which ignores them; `chattr +i` (an immutable file) is used where the
// file system and privileges allow it, and the test says so when it skips.
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Knex } from 'knex';
import request from 'supertest';
import { afterEach, describe, expect, test } from 'vitest';
import { CommitQueueFull, GroupCommitter } from '../../platform/group-commit.js';
import { unavailabilityOf } from '../../platform/database-errors.js';
import { startFailure } from '../../platform/flags.js';
import { openPostgres, parsePostgresUrl } from '../../platform/postgres.js';
import { createQueueApp, openQueueStore, openSqliteQueueStore, QueueError } from '../../queue/index.js';
import { KnexQueueStore } from '../../queue/knex-store.js';
import { openPostgresQueueStore, postgresDialect } from '../../queue/postgres-store.js';
import {
  createKnexEffectStore,
  createReceiverApp,
  openPostgresEffectStore,
  openSqliteEffectStore,
  recordEffect,
  ReceiverError,
} from '../../receiver/index.js';
import { postgresEffectDialect } from '../../receiver/postgres-store.js';
import { fakeClock } from '../helpers/clock.js';
import { testSchema } from '../helpers/postgres.js';
import { tempDir } from '../helpers/tmp.js';
import { newJobInput } from '../queue/store.suite.js';

const closers: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

const clock = fakeClock(1_700_000_000_000);

/** Runs `sql` on the store's one SQLite connection (the pool holds exactly one). */
async function pragma(knex: Knex, sql: string): Promise<void> {
  await knex.raw(sql);
}

/** Caps the file at the pages it has, so the next write that needs a page fails with SQLITE_FULL. */
async function fillUp(knex: Knex): Promise<void> {
  const [{ page_count: pages }] = (await knex.raw('PRAGMA page_count')) as [{ page_count: number }];
  await pragma(knex, `PRAGMA max_page_count = ${pages}`);
}

const BIG = { blob: 'x'.repeat(64 * 1024) };

describe('SQLite full or read-only: 503 saying so, reads go on, writes recover', () => {
  async function queue() {
    const store = await openSqliteQueueStore({ filename: join(tempDir('leasehold-full-'), 'q.sqlite'), clock });
    closers.push(() => store.close());
    const app = createQueueApp({ store });
    closers.push(() => app.close());
    await request(app).post('/jobs').send({ id: 'kept', qty: 1 });
    return { store, knex: store.knex, http: () => request(app) };
  }

  test('queue: a full database refuses writes with 503 queue_unavailable "full", serves reads, and recovers', async () => {
    const { knex, http } = await queue();
    await fillUp(knex);
    const refused = await http().post('/jobs').send({ id: 'big', qty: 1, payload: BIG });
    expect({ status: refused.status, code: refused.body.error?.code }).toEqual({
      status: 503,
      code: 'queue_unavailable',
    });
    expect(refused.body.error.message).toMatch(/database is full .*reads still work/);
    expect((await http().get('/jobs/kept')).status).toBe(200);
    expect((await http().get('/stats')).body).toEqual({ pending: 1, leased: 0, done: 0, dead: 0 });
    expect((await http().get('/jobs/big')).status).toBe(404);

    await pragma(knex, 'PRAGMA max_page_count = 1073741823');
    expect((await http().post('/jobs').send({ id: 'big', qty: 1, payload: BIG })).status).toBe(201);
  });

  test('queue: a read-only database refuses writes with 503 queue_unavailable "read-only", serves reads, and recovers', async () => {
    const { knex, http } = await queue();
    await pragma(knex, 'PRAGMA query_only = ON');
    const refused = await http().post('/claims').send({ owner: 'w1' });
    expect({ status: refused.status, code: refused.body.error?.code }).toEqual({
      status: 503,
      code: 'queue_unavailable',
    });
    expect(refused.body.error.message).toMatch(/database is read-only .*reads still work/);
    expect((await http().get('/jobs?status=pending')).body.jobs).toHaveLength(1);

    await pragma(knex, 'PRAGMA query_only = OFF');
    expect((await http().post('/claims').send({ owner: 'w1' })).status).toBe(200);
  });

  test('receiver: full, then read-only: 503 busy saying which, reads go on, and it recovers', async () => {
    const store = await openSqliteEffectStore({ filename: join(tempDir('leasehold-full-'), 'r.sqlite') });
    closers.push(() => store.close());
    const app = createReceiverApp({ store, clock });
    const post = (jobId: string) => request(app).post('/effects').set('fencing-token', '1').send({ jobId, qty: 1 });
    expect((await post('kept')).status).toBe(201);

    await fillUp(store.knex);
    // Each applied effect takes room; keep going until the file has none left.
    let refused: request.Response | undefined;
    for (let i = 0; i < 5_000 && !refused; i += 1) {
      const res = await post(`job-${i}-${'x'.repeat(200)}`);
      if (res.status !== 201) refused = res;
    }
    expect({ status: refused?.status, code: refused?.body.error?.code }).toEqual({ status: 503, code: 'busy' });
    expect(refused?.body.error.message).toMatch(/receiver's database is full/);
    expect((await request(app).get('/effects/kept')).status).toBe(200);
    await pragma(store.knex, 'PRAGMA max_page_count = 1073741823');
    expect((await post('after-full')).status).toBe(201);

    await pragma(store.knex, 'PRAGMA query_only = ON');
    const readOnly = await post('while-read-only');
    expect({ status: readOnly.status, code: readOnly.body.error?.code }).toEqual({ status: 503, code: 'busy' });
    expect(readOnly.body.error.message).toMatch(/receiver's database is read-only/);
    expect((await request(app).get('/totals')).status).toBe(200);
    await pragma(store.knex, 'PRAGMA query_only = OFF');
    expect((await post('while-read-only')).status).toBe(201);
  });
});

describe('PostgreSQL read-only (a standby, or default_transaction_read_only): 503 saying so, reads go on', () => {
  /** A pool whose every session is read-only, on a schema an ordinary store has migrated. */
  async function readOnlyKnex(url: string): Promise<{ knex: Knex; schema: string | undefined }> {
    const target = parsePostgresUrl(url);
    const readOnly = new URL(target.connectionString);
    readOnly.searchParams.set('options', '-c default_transaction_read_only=on');
    const knex = openPostgres({ connectionString: readOnly.toString(), schema: target.schema });
    closers.push(() => knex.destroy());
    return { knex, schema: target.schema };
  }

  test('queue: writes are 503 queue_unavailable "read-only"; reads answer', async () => {
    const { url } = testSchema('lh_ro');
    const writable = await openPostgresQueueStore({ connectionString: url, clock });
    closers.push(() => writable.close());
    await writable.enqueue(newJobInput({ id: 'kept' }));
    const { knex, schema } = await readOnlyKnex(url);
    const store = new KnexQueueStore(knex, postgresDialect({ schema, clock, retryBudgetMs: 500 }));
    const error = await store.claim('w1', 1_000).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(QueueError);
    expect(error).toMatchObject({ code: 'queue_unavailable', status: 503 });
    expect((error as QueueError).message).toMatch(/database is read-only/);
    expect(await store.get('kept')).toMatchObject({ status: 'pending' });
    expect(await store.stats()).toEqual({ pending: 1, leased: 0, done: 0, dead: 0 });
  });

  test('receiver: a record is 503 busy "read-only"; reads answer', async () => {
    const { url } = testSchema('lh_ro');
    const writable = await openPostgresEffectStore({ connectionString: url });
    closers.push(() => writable.close());
    await recordEffect(writable, { jobId: 'kept', qty: 2, token: 1 }, clock);
    const { knex } = await readOnlyKnex(url);
    const store = createKnexEffectStore({ knex, dialect: postgresEffectDialect(500) });
    const error = await recordEffect(store, { jobId: 'new', qty: 1, token: 1 }, clock).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(ReceiverError);
    expect(error).toMatchObject({ code: 'busy', status: 503 });
    expect((error as ReceiverError).message).toMatch(/database is read-only/);
    expect(await store.totals()).toEqual({ effects: 1, qty: 2 });
  });

  test('PostgreSQL disk_full (53100) and read_only_sql_transaction (25006) are told apart from other errors', () => {
    expect(unavailabilityOf(Object.assign(new Error('could not extend file'), { code: '53100' }))).toBe('full');
    expect(unavailabilityOf(Object.assign(new Error('read-only transaction'), { code: '25006' }))).toBe('read_only');
    expect(unavailabilityOf(Object.assign(new Error('unique violation'), { code: '23505' }))).toBeUndefined();
  });
});

describe('more writes waiting than the store takes: shed with 503, never a queue that grows without bound', () => {
  test('the group commit refuses a write past maxPending at once with CommitQueueFull', async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const committer = new GroupCommitter<null>(
      async (work) => {
        await held;
        return work(null);
      },
      { maxPending: 2, windowMs: 0 },
    );
    const running = committer.submit(async () => 'running');
    // The first write leaves the waiting line for its transaction, which the test holds open.
    await new Promise((resolve) => setImmediate(resolve));
    const waiting = [committer.submit(async () => 'a'), committer.submit(async () => 'b')];
    const shed = await committer.submit(async () => 'c').catch((err: unknown) => err);
    expect(shed).toBeInstanceOf(CommitQueueFull);
    expect(unavailabilityOf(shed)).toBe('overloaded');
    release();
    expect(await Promise.all([running, ...waiting])).toEqual(['running', 'a', 'b']);
    expect(await committer.submit(async () => 'later')).toBe('later');
  });

  test('a queue store with 10 000 writes waiting answers the next with 503 queue_unavailable', async () => {
    const store = await openSqliteQueueStore({
      filename: join(tempDir('leasehold-overload-'), 'q.sqlite'),
      clock,
      commitWindowMs: 0,
    });
    closers.push(() => store.close());
    const input = (i: number) => newJobInput({ id: `j${i}` });
    const writes = Array.from({ length: CommitQueueFull.DEFAULT_MAX + 50 }, (_, i) =>
      store.enqueue(input(i)).then(
        () => 'ok',
        (err: unknown) => err,
      ),
    );
    const outcomes = await Promise.all(writes);
    const shed = outcomes.filter((outcome) => outcome !== 'ok');
    expect(shed.length).toBeGreaterThan(0);
    for (const err of shed) {
      expect(err).toMatchObject({ code: 'queue_unavailable', status: 503 });
      expect((err as QueueError).message).toMatch(/more writes waiting/);
    }
    expect((await store.stats()).pending).toBe(outcomes.length - shed.length);
  });
});

describe('at start: one line saying why, never a stack', () => {
  test('a --db that is not a SQLite database', async () => {
    const filename = join(tempDir('leasehold-corrupt-'), 'q.sqlite');
    writeFileSync(filename, 'this is not a database, but a page of text long enough to be read as one. '.repeat(20));
    for (const open of [() => openQueueStore({ db: filename }), () => openSqliteEffectStore({ filename })]) {
      const err = await open().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(startFailure(err)).toMatch(/^the file --db names is not a SQLite database, or is damaged/);
    }
  });

  test('a --db under a regular file', async () => {
    const dir = tempDir('leasehold-underfile-');
    writeFileSync(join(dir, 'file'), 'x');
    for (const db of [join(dir, 'file', 'q.sqlite'), join(dir, 'file', 'deeper', 'q.sqlite')]) {
      for (const open of [() => openQueueStore({ db }), () => openSqliteEffectStore({ filename: db })]) {
        const err = await open().then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(startFailure(err), db).toMatch(/^--db names a path under a file, not a folder/);
      }
    }
  });

  test('a read-only database file (chattr +i, where the file system allows it)', async (context) => {
    const dir = tempDir('leasehold-readonly-');
    mkdirSync(dir, { recursive: true });
    const filename = join(dir, 'q.sqlite');
    const first = await openSqliteQueueStore({ filename });
    await first.close();
    try {
      execFileSync('chattr', ['+i', filename], { stdio: 'ignore' });
    } catch {
      context.skip('chattr +i is not available here (not permitted, or not this file system)');
    }
    closers.push(() => void execFileSync('chattr', ['-i', filename], { stdio: 'ignore' }));
    const err = await openSqliteQueueStore({ filename }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(startFailure(err)).toMatch(/^the database is read-only .*make it writable or pick another with --db/);
  });
});
