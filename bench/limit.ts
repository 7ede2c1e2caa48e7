// The physical limit: one-row write transactions per second on the same disk, with the
// queue's settings (rollback journal, synchronous=FULL, BEGIN IMMEDIATE), one after another.
// Through the bare `sqlite3` driver (the limit) and through knex as the queue opens it.
import type { Knex } from 'knex';
import { openSqlite } from '../platform/sqlite.js';
import { changeCounter, openBare, type BareDb } from './bare-sqlite.js';
import { runLoops } from './loops.js';
import { counted, type Probe } from './measure.js';

export const LIMIT_TABLE = `CREATE TABLE IF NOT EXISTS bench_limit (id INTEGER PRIMARY KEY, n INTEGER NOT NULL);
  INSERT OR IGNORE INTO bench_limit (id, n) VALUES (1, 0);`;
export const LIMIT_UPDATE = 'UPDATE bench_limit SET n = n + 1 WHERE id = 1';

export interface LimitProbe extends Probe {
  close(): Promise<void>;
}

/** BEGIN IMMEDIATE; UPDATE one row; COMMIT — three calls on the bare driver. */
export async function openBareLimit(filename: string): Promise<LimitProbe> {
  const db: BareDb = await openBare(filename);
  await db.exec(LIMIT_TABLE);
  return {
    prepare: async () => undefined,
    slice: (ms) => {
      let statements = 0;
      return counted(
        () => changeCounter(filename),
        () =>
          runLoops(1, ms, async () => {
            await db.run('BEGIN IMMEDIATE');
            await db.run(LIMIT_UPDATE);
            await db.run('COMMIT');
            statements += 3;
            return true;
          }),
        () => statements,
      );
    },
    close: () => db.close(),
  };
}

/** The same transaction through knex, opened by queue/sqlite.ts like the stores are. */
export async function openKnexLimit(filename: string): Promise<LimitProbe> {
  const knex: Knex = openSqlite({ filename });
  for (const sql of LIMIT_TABLE.split(';').filter((s) => s.trim())) await knex.raw(sql);
  let statements = 0;
  knex.on('query', () => statements++);
  return {
    prepare: async () => undefined,
    slice: (ms) => {
      statements = 0;
      return counted(
        () => changeCounter(filename),
        () =>
          runLoops(1, ms, async () => {
            await knex.transaction(async (trx) => {
              await trx.raw(LIMIT_UPDATE);
            });
            return true;
          }),
        () => statements,
      );
    },
    close: () => knex.destroy(),
  };
}
