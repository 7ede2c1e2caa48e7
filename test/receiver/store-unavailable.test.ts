// A database that stays locked or unreachable: the receiver's store itself rejects with `busy`
// (the driver's error kept as `cause`) and records nothing; the HTTP layer only renders it.
import { describe, expect, onTestFinished, test } from 'vitest';
import { join } from 'node:path';
import { openPostgres, parsePostgresUrl } from '../../platform/postgres.js';
import { isBusyError } from '../../platform/sqlite.js';
import { holdWriteLock } from '../helpers/sqlite-lock.js';
import {
  createKnexEffectStore,
  openSqliteEffectStore,
  postgresEffectDialect,
  recordEffect,
  ReceiverError,
} from '../../receiver/index.js';
import { fakeClock } from '../helpers/clock.js';
import { tempDir } from '../helpers/tmp.js';
import { snapshot } from './setup.js';

/** Nothing listens on port 1: every query fails with ECONNREFUSED, as when the server is down. */
const UNREACHABLE = 'postgres://postgres@127.0.0.1:1/test';

const SQLITE_BUSY_MESSAGE = 'The receiver database stayed locked by another writer; retry the request shortly.';
const POSTGRES_MESSAGE =
  'The receiver could not reach its PostgreSQL database, or kept conflicting with other writers; retry the request shortly.';

/** Asserts that `promise` rejects with a ReceiverError of `code`, and returns it for more checks. */
async function rejection(promise: Promise<unknown>, code: string): Promise<ReceiverError> {
  const outcome = await promise.then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );
  if (!('error' in outcome)) {
    throw new Error(`expected a rejection with code "${code}", but it resolved with ${JSON.stringify(outcome.value)}`);
  }
  expect(outcome.error, `expected a ReceiverError with code "${code}"`).toBeInstanceOf(ReceiverError);
  expect((outcome.error as ReceiverError).code).toBe(code);
  return outcome.error as ReceiverError;
}

/** A store on a fresh file that gives up on a held lock after about 150 ms. */
async function impatientSqliteStore() {
  const filename = join(tempDir('leasehold-receiver-unavailable-'), 'receiver.sqlite');
  const store = await openSqliteEffectStore({ filename, busyTimeoutMs: 20, busyBudgetMs: 150 });
  onTestFinished(() => store.close());
  return { store, filename };
}

describe('receiver store: SQLite that stays locked', () => {
  test('transactions that outlast the busy budget are busy, with SQLITE_BUSY as their cause, and record nothing', async () => {
    const { store, filename } = await impatientSqliteStore();
    const clock = fakeClock();
    await recordEffect(store, { jobId: 'a', qty: 1, token: 1 }, clock);
    const before = await snapshot(store);
    const release = await holdWriteLock(filename);

    // Submitted together: the first runs alone, the others wait for it and share the next transaction.
    const outcomes = await Promise.allSettled(
      ['a', 'b', 'c', 'd'].map((jobId) => recordEffect(store, { jobId, qty: 1, token: 2 }, clock)),
    );
    const seen = outcomes.map((outcome) =>
      outcome.status === 'rejected' && outcome.reason instanceof ReceiverError
        ? outcome.reason.code
        : `${outcome.status}: ${String(outcome.status === 'rejected' ? outcome.reason : JSON.stringify(outcome.value))}`,
    );
    expect(seen).toEqual(Array(4).fill('busy'));
    const error = (outcomes[0] as PromiseRejectedResult).reason as ReceiverError;
    expect(error.status).toBe(503);
    expect(error.message).toBe(SQLITE_BUSY_MESSAGE);
    expect(isBusyError(error.cause), `expected SQLITE_BUSY as the cause, got ${String(error.cause)}`).toBe(true);
    expect(error.toJSON(), 'the body carries code and message only').toEqual({
      error: { code: 'busy', message: SQLITE_BUSY_MESSAGE },
    });
    await rejection(store.reset(), 'busy');

    await release();
    expect(await snapshot(store), 'effects, totals and journal as before the lock').toEqual(before);
  });

  test("the receiver's own errors pass unchanged, even when a message reads like a driver error", async () => {
    const { store } = await impatientSqliteStore();
    const message = 'SQLITE_BUSY: database is locked, says the downstream';
    const applyFails = async () => {
      throw new ReceiverError('apply_failed', message);
    };
    const error = await rejection(
      recordEffect(store, { jobId: 'a', qty: 1, token: 1 }, fakeClock(), applyFails),
      'apply_failed',
    );
    expect(error.message).toBe(message);
    expect(await store.totals()).toEqual({ effects: 0, qty: 0 });
  });
});

describe('receiver store: PostgreSQL that cannot be reached', () => {
  test('transactions and reads are busy, with the driver error as their cause', async () => {
    const store = createKnexEffectStore({
      knex: openPostgres(parsePostgresUrl(UNREACHABLE)),
      dialect: postgresEffectDialect(100),
    });
    onTestFinished(() => store.close());

    const error = await rejection(recordEffect(store, { jobId: 'a', qty: 1, token: 1 }, fakeClock()), 'busy');
    expect(error.status).toBe(503);
    expect(error.message).toBe(POSTGRES_MESSAGE);
    expect(error.cause).toMatchObject({ code: 'ECONNREFUSED' });
    await rejection(store.listEffects(), 'busy');
    await rejection(store.getEffect('a'), 'busy');
    await rejection(store.totals(), 'busy');
    await rejection(store.journal(), 'busy');
    await rejection(store.reset(), 'busy');
  });
});
