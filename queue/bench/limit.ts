// The physical limit: one-row write transactions per second on the same disk, with the
// queue's settings (rollback journal, synchronous=FULL, BEGIN IMMEDIATE), one after another.
// Through the bare `sqlite3` driver (the limit) and through knex as the queue opens it.
import type { Knex } from 'knex';
import { openSqlite } from '../sqlite.js';
import { changeCounter, openBare, type BareDb } from './bare-sqlite.js';
import { runLoops } from './loops.js';
import { delta, throughput, type Throughput } from './measure.js';

const TABLE = `CREATE TABLE IF NOT EXISTS bench_limit (id INTEGER PRIMARY KEY, n INTEGER NOT NULL);
  INSERT OR IGNORE INTO bench_limit (id, n) VALUES (1, 0);`;
const UPDATE = 'UPDATE bench_limit SET n = n + 1 WHERE id = 1';

export interface LimitProbe {
  measure(windowMs: number): Promise<Throughput>;
  close(): Promise<void>;
}

/** BEGIN IMMEDIATE; UPDATE one row; COMMIT — three calls on the bare driver. */
export async function openBareLimit(filename: string): Promise<LimitProbe> {
  const db: BareDb = await openBare(filename);
  await db.exec(TABLE);
  return {
    async measure(windowMs) {
      const before = await changeCounter(filename);
      const result = await runLoops(1, windowMs, async () => {
        await db.run('BEGIN IMMEDIATE');
        await db.run(UPDATE);
        await db.run('COMMIT');
        return true;
      });
      return throughput(result, delta(before, await changeCounter(filename)), result.jobs * 3);
    },
    close: () => db.close(),
  };
}

/** The same transaction through knex, opened by queue/sqlite.ts like the stores are. */
export async function openKnexLimit(filename: string): Promise<LimitProbe> {
  const knex: Knex = openSqlite({ filename });
  await knex.raw(TABLE.split(';')[0]!);
  await knex.raw(TABLE.split(';')[1]!);
  let statements = 0;
  knex.on('query', () => statements++);
  return {
    async measure(windowMs) {
      const before = await changeCounter(filename);
      statements = 0;
      const result = await runLoops(1, windowMs, async () => {
        await knex.transaction(async (trx) => {
          await trx.raw(UPDATE);
        });
        return true;
      });
      return throughput(result, delta(before, await changeCounter(filename)), statements);
    },
    close: () => knex.destroy(),
  };
}
