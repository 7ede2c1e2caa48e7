// The queue's SQLite store exactly as openSqliteQueueStore builds it (same connection, pragmas,
// dialect and migrations), with every statement its connection runs timed by a StatementClock.
import { KnexQueueStore } from '../queue/knex-store.js';
import { sqliteDialect } from '../queue/sqlite-store.js';
import { openSqlite } from '../platform/sqlite.js';
import { systemClock } from '../queue/types.js';
import type { StatementClock } from './statement-clock.js';

export async function openObservedSqliteStore(filename: string, clock: StatementClock): Promise<KnexQueueStore> {
  const db = openSqlite({ filename });
  db.onStatement((sql, ms) => clock.record(sql, ms));
  return KnexQueueStore.open(db.knex, sqliteDialect(db, systemClock, 60_000));
}
