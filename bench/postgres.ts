// The PostgreSQL columns: a schema of its own for each, on the server --postgres names, the
// server's own write limit (BEGIN; UPDATE one row; COMMIT through the bare `pg` driver), and
// the schemas dropped afterwards.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { openPostgres, parsePostgresUrl } from '../platform/postgres.js';
import { runLoops } from './loops.js';
import { localCounts, meters, metered, postgresServerCpu } from './meters.js';
import type { LimitProbe } from './limit.js';

export class PostgresSchemas {
  private readonly names: string[] = [];
  private readonly prefix = `leasehold_bench_${randomBytes(3).toString('hex')}`;

  constructor(readonly url: string) {}

  /** The server's URL with `?schema=` set to a fresh schema for `purpose`. */
  urlFor(purpose: string): string {
    const name = `${this.prefix}_${purpose}`;
    this.names.push(name);
    const url = new URL(this.url);
    url.searchParams.set('schema', name);
    return url.toString();
  }

  async dropAll(): Promise<void> {
    const knex = openPostgres({ ...parsePostgresUrl(this.url), poolMax: 2 });
    try {
      for (const name of this.names) await knex.raw(`DROP SCHEMA IF EXISTS "${name}" CASCADE`);
    } finally {
      await knex.destroy();
    }
  }
}

/** PostgreSQL's limit on this machine: one-row write transactions, one after another. */
export async function openPostgresLimit(schemaUrl: string): Promise<LimitProbe> {
  const { connectionString, schema } = parsePostgresUrl(schemaUrl);
  const client = new pg.Client({ connectionString });
  await client.connect();
  await client.query(`CREATE SCHEMA IF NOT EXISTS "${schema}"`);
  await client.query(`SET search_path TO "${schema}"`);
  await client.query('CREATE TABLE IF NOT EXISTS bench_limit (id integer PRIMARY KEY, n bigint NOT NULL)');
  await client.query('INSERT INTO bench_limit (id, n) VALUES (1, 0) ON CONFLICT DO NOTHING');
  const meter = meters(localCounts(true), postgresServerCpu(schemaUrl));
  return {
    prepare: async () => undefined,
    slice: (ms) =>
      metered(meter, () =>
        runLoops(1, ms, async () => {
          await client.query('BEGIN');
          await client.query('UPDATE bench_limit SET n = n + 1 WHERE id = 1');
          await client.query('COMMIT');
          return true;
        }),
      ),
    close: () => client.end(),
  };
}
