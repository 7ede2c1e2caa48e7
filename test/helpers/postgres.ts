// A PostgreSQL schema of its own for each test, on the local server (LEASEHOLD_TEST_DATABASE_URL,
// default postgres://postgres@127.0.0.1:5432/test): dropped when the test passes, kept (its name
// printed) when it fails, like tempDir's folders.
import { randomBytes } from 'node:crypto';
import { onTestFinished } from 'vitest';
import { openPostgres, parsePostgresUrl } from '../../platform/postgres.js';

export const TEST_DATABASE_URL = process.env.LEASEHOLD_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

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
  const schema = `${prefix}_${randomBytes(6).toString('hex')}`;
  onTestFinished(async ({ task }) => {
    if (task.result?.state === 'fail') console.error(`kept PostgreSQL schema of failed test "${task.name}": ${schema}`);
    else await dropSchema(schema);
  });
  return { schema, url: schemaUrl(schema) };
}

export async function dropSchema(schema: string): Promise<void> {
  const knex = openPostgres({ ...parsePostgresUrl(TEST_DATABASE_URL), poolMax: 2 });
  try {
    await knex.raw(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await knex.destroy();
  }
}
