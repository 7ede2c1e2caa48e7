// The queue's SQLite store exactly as openSqliteQueueStore builds it (same knex client, pragmas,
// dialect and migrations), except that each new driver connection is handed to a
// StatementClock before its first statement, so statements it prepares and reuses are timed.
import knexFactory, { type Knex } from 'knex';
import { KnexQueueStore } from '../queue/knex-store.js';
import { sqliteDialect } from '../queue/sqlite-store.js';
import { openSqlite } from '../platform/sqlite.js';
import { systemClock } from '../queue/types.js';
import type { StatementClock } from './statement-clock.js';

type AfterCreate = (conn: unknown, done: (err: Error | null, conn: unknown) => void) => void;

export async function openObservedSqliteStore(filename: string, clock: StatementClock): Promise<KnexQueueStore> {
  const template = openSqlite({ filename });
  const Client = template.client.constructor as typeof Knex.Client;
  const config = template.client.config as Knex.Config & { pool: { afterCreate: AfterCreate } };
  await template.destroy();
  const afterCreate = config.pool.afterCreate;
  const knex = knexFactory({
    ...config,
    client: Client,
    pool: {
      ...config.pool,
      afterCreate(conn: unknown, done: (err: Error | null, conn: unknown) => void) {
        clock.wrap(conn as Record<string, unknown>);
        afterCreate(conn, done);
      },
    },
  });
  return KnexQueueStore.open(knex, sqliteDialect(systemClock, 60_000));
}
