// The physical limit: one-row write transactions per second on the same disk, with the
// queue's settings (synchronous=FULL, BEGIN IMMEDIATE), one after another, on the bare
// `sqlite3` driver: in the rollback journal (the limit every goal is a ratio of) and in WAL.
import { openBare, type BareDb } from './bare-sqlite.js';
import { runLoops } from './loops.js';
import type { Probe } from './measure.js';
import { localCounts, meters, metered, sqliteCommits } from './meters.js';

export const LIMIT_TABLE = `CREATE TABLE IF NOT EXISTS bench_limit (id INTEGER PRIMARY KEY, n INTEGER NOT NULL);
  INSERT OR IGNORE INTO bench_limit (id, n) VALUES (1, 0);`;
export const LIMIT_UPDATE = 'UPDATE bench_limit SET n = n + 1 WHERE id = 1';

export interface LimitProbe extends Probe {
  close(): Promise<void>;
}

/** BEGIN IMMEDIATE; UPDATE one row; COMMIT — three calls on the bare driver. */
export async function openBareLimit(filename: string, journal: 'delete' | 'wal' = 'delete'): Promise<LimitProbe> {
  const db: BareDb = await openBare(filename, journal);
  await db.exec(LIMIT_TABLE);
  const meter = meters(sqliteCommits(filename, journal), localCounts());
  return {
    prepare: async () => undefined,
    slice: (ms) =>
      metered(meter, () =>
        runLoops(1, ms, async () => {
          await db.run('BEGIN IMMEDIATE');
          await db.run(LIMIT_UPDATE);
          await db.run('COMMIT');
          return true;
        }),
      ),
    close: () => db.close(),
  };
}
