// vitest's globalSetup: asks the test PostgreSQL once whether it answers, before any test file
// runs, and tells the files (inject('postgres')). Locally an absent server skips the PostgreSQL
// suites with one line saying so; with CI=true they run, and fail, as they must there.
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { redactDb } from '../../platform/postgres.js';

export const DEFAULT_TEST_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/test';

export interface PostgresProbe {
  url: string;
  /** Null when it answered; else why not, in a few words. */
  unreachable: string | null;
  /** CI=true: its suites must run even when it does not answer. */
  required: boolean;
}

declare module 'vitest' {
  export interface ProvidedContext {
    postgres: PostgresProbe;
  }
}

/**
 * Asked once per `vitest` run, however many projects share this setup: each project loads the
 * module anew, but they share the process.
 */
const PROBED = Symbol.for('leasehold.test.postgresProbe');

export default async function setup(project: TestProject): Promise<void> {
  const shared = globalThis as { [PROBED]?: Promise<PostgresProbe> };
  shared[PROBED] ??= probe();
  project.provide('postgres', await shared[PROBED]);
}

async function probe(): Promise<PostgresProbe> {
  const url = process.env.LEASEHOLD_TEST_DATABASE_URL || DEFAULT_TEST_DATABASE_URL;
  const required = /^(true|1)$/i.test(process.env.CI ?? '');
  const unreachable = await answers(url);
  if (unreachable !== null) {
    const where = `PostgreSQL not reachable at ${redactDb(url)} (${unreachable})`;
    console.warn(
      required
        ? `${where}; CI is set, so its suites run and will fail — start it, or set LEASEHOLD_TEST_DATABASE_URL`
        : `${where}; its suites were skipped — set LEASEHOLD_TEST_DATABASE_URL`,
    );
  }
  return { url, unreachable, required };
}

/** Null when `SELECT 1` answers within 3 s; else the reason. */
async function answers(url: string): Promise<string | null> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3_000 });
  client.on('error', () => {});
  try {
    await client.connect();
    await client.query('SELECT 1');
    return null;
  } catch (err) {
    const { code, message } = err as { code?: string; message?: string };
    if (!message) return code ?? String(err);
    return code && !message.includes(code) ? `${code}: ${message}` : message;
  } finally {
    await client.end().catch(() => {});
  }
}
