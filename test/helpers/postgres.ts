// A PostgreSQL schema of its own for each test, on the test server (LEASEHOLD_TEST_DATABASE_URL,
// default postgres://postgres@127.0.0.1:5432/test): dropped when the test passes, kept (its name
// printed) when it fails, like tempDir's folders. When the server does not answer (asked once, by
// postgres-probe.ts), a test that asks for a schema is skipped, unless CI=true.
import { randomBytes } from 'node:crypto';
import { inject, onTestFinished, TestRunner } from 'vitest';
import { openPostgres, parsePostgresUrl } from '../../platform/postgres.js';
import { DEFAULT_TEST_DATABASE_URL } from './postgres-probe.js';

export const TEST_DATABASE_URL = process.env.LEASEHOLD_TEST_DATABASE_URL || DEFAULT_TEST_DATABASE_URL;

/** The test database's URL with `?schema=` set to a fresh schema name. */
export function schemaUrl(schema: string): string {
  const url = new URL(TEST_DATABASE_URL);
  url.searchParams.set('schema', schema);
  return url.toString();
}

/**
 * A fresh schema name for the current test and its `?schema=` URL. Call from inside a test:
 * the schema is dropped after the test's afterEach hooks (which close its stores) have run.
 */
export function testSchema(prefix = 'lh'): { schema: string; url: string } {
  const probe = inject('postgres');
  if (probe.unreachable !== null && !probe.required) {
    TestRunner.getCurrentTest()?.context.skip(`PostgreSQL not reachable (${probe.unreachable})`);
  }
  const schema = `${prefix}_${randomBytes(6).toString('hex')}`;
  onTestFinished(async ({ task }) => {
    if (task.result?.state !== 'fail') await dropSchema(schema);
    else if (await schemaExists(schema))
      console.error(`kept PostgreSQL schema of failed test "${task.name}": ${schema}`);
  });
  return { schema, url: schemaUrl(schema) };
}

/** False too when the server cannot be asked: then no schema was kept. */
async function schemaExists(schema: string): Promise<boolean> {
  const knex = openPostgres({ ...parsePostgresUrl(TEST_DATABASE_URL), poolMax: 1 });
  try {
    const found = await knex.raw('SELECT 1 FROM pg_namespace WHERE nspname = ?', [schema]);
    return (found as { rowCount: number }).rowCount > 0;
  } catch {
    return false;
  } finally {
    await knex.destroy();
  }
}

export async function dropSchema(schema: string): Promise<void> {
  const knex = openPostgres({ ...parsePostgresUrl(TEST_DATABASE_URL), poolMax: 2 });
  try {
    await knex.raw(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await knex.destroy();
  }
}

/**
 * Holds the lock of job `id`'s row in `schema` from a connection of its own, in a transaction,
 * until `release()`: a write of the queue's that needs the row waits behind it. Resolves once the
 * lock is held; `release()` resolves once that transaction has ended and its connection is closed.
 */
export async function holdJobRow(schema: string, id: string): Promise<{ release(): Promise<void> }> {
  const other = openPostgres({ ...parsePostgresUrl(TEST_DATABASE_URL), schema, poolMax: 1 });
  let locked!: () => void;
  const isLocked = new Promise<void>((resolve) => (locked = resolve));
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  const holder = other.transaction(async (trx) => {
    await trx.raw(`SELECT 1 FROM queue_jobs WHERE id = ? FOR UPDATE`, [id]);
    locked();
    await released;
  });
  await Promise.race([isLocked, holder]);
  let ended: Promise<void> | undefined;
  return {
    release: () =>
      (ended ??= (async () => {
        release();
        try {
          await holder;
        } finally {
          await other.destroy();
        }
      })()),
  };
}
