// One claim + finish cycle, several ways, each timed per statement inside the driver: the
// store's own SQL (queue/sql/index.ts) on the store's write path (platform/sqlite.ts: one
// connection, statements prepared once, group commit), and the same SQL on the bare driver
// without it, with statements prepared once or prepared on every call.
import type { Executor } from '../platform/sql.js';
import { openSqlite } from '../platform/sqlite.js';
import { claimManyIn, finishIn } from '../queue/sql/index.js';
import type sqlite3 from 'sqlite3';
import { openBare, type BareDb } from './bare-sqlite.js';
import { runLoops, type Cycle } from './loops.js';
import { QueueDb, Sizing, type Probe } from './measure.js';
import { meters, metered } from './meters.js';
import { StatementClock } from './statement-clock.js';

const LEASE_MS = 30_000;
const OWNER = 'bench-profile';

export interface Breakdown {
  cycles: number;
  wallMsPerCycle: number;
  /** Time inside the driver (statement execution, fsync, thread-pool hop). */
  driverMsPerCycle: number;
  statementsPerCycle: number;
  kinds: { kind: string; callsPerCycle: number; msPerCall: number }[];
}

export interface CycleVariant extends Probe {
  id: string;
  label: string;
  /** Where the time of the cycles since the last reset went. */
  breakdown(): Breakdown;
  resetBreakdown(): void;
  close(): Promise<void>;
}

export interface Schema {
  /** Statements run once on a freshly migrated file. */
  changes: string[];
}

export const SHIPPED: Schema = { changes: [] };
/**
 * The index migration 002 dropped: SQLite's planner preferred it to the partial indexes and
 * sorted every pending job on each claim. Kept here to show that cost against the backlog.
 */
export const WITH_STATUS_INDEX: Schema = {
  changes: ['CREATE INDEX IF NOT EXISTS queue_jobs_status ON queue_jobs (status)'],
};

export function breakdownOf(clock: StatementClock, cycles: number, wallMs: number): Breakdown {
  const per = (n: number) => (cycles > 0 ? n / cycles : 0);
  return {
    cycles,
    wallMsPerCycle: per(wallMs),
    driverMsPerCycle: per(clock.driverMs()),
    statementsPerCycle: per(clock.statements()),
    kinds: [...clock.totals.entries()].map(([kind, t]) => ({
      kind,
      callsPerCycle: per(t.calls),
      msPerCall: t.ms / t.calls,
    })),
  };
}

/** A variant whose cycle runs on `queue`'s database, timed by `clock`. */
function variant(
  id: string,
  label: string,
  queue: QueueDb,
  clock: StatementClock,
  cycle: Cycle,
  close: () => Promise<void>,
): CycleVariant {
  let cycles = 0;
  let wallMs = 0;
  const sizing = new Sizing(0.5);
  const meter = meters(queue.commits, async () => ({ statements: clock.statements() }));
  return {
    id,
    label,
    async prepare(slice) {
      // Statements sent while topping up are not the cycle's.
      clock.paused = true;
      try {
        await queue.topUp(sizing.pending(slice), id);
      } finally {
        clock.paused = false;
      }
    },
    async slice(ms) {
      const result = await metered(meter, () => runLoops(1, ms, cycle));
      sizing.observe(result);
      cycles += result.jobs;
      wallMs += result.elapsedMs;
      return result;
    },
    breakdown: () => breakdownOf(clock, cycles, wallMs),
    resetBreakdown() {
      clock.reset();
      cycles = 0;
      wallMs = 0;
    },
    close,
  };
}

/** A claim and a finish of the store's SQL, each in a transaction `run` provides, at the process clock. */
function sqlCycle(run: <T>(work: (executor: Executor) => Promise<T>) => Promise<T>): Cycle {
  return async () => {
    const [lease] = await run((executor) => claimManyIn(executor, 'sqlite', OWNER, LEASE_MS, 1, Date.now()));
    if (!lease) return false;
    await run((executor) =>
      finishIn(executor, 'reject', lease.id, { owner: OWNER, token: lease.token }, null, Date.now()),
    );
    return true;
  };
}

/**
 * The store's SQL on the store's own write path, every statement the connection runs timed: what
 * the queue's SQLite store does for a claim and a finish, without the HTTP edge.
 */
export async function storeVariant(db: string, id: string, label: string): Promise<CycleVariant> {
  const queue = await QueueDb.open(db);
  const clock = new StatementClock();
  const sqlite = openSqlite({ filename: db });
  sqlite.onStatement((sql, ms) => clock.record(sql, ms));
  return variant(id, label, queue, clock, sqlCycle(sqlite.write), async () => {
    await sqlite.close();
    await queue.close();
  });
}

/**
 * The store's own claimManyIn/finishIn on the bare driver: the same SQL and transactions, no
 * knex; each statement prepared once and reused (as platform/sqlite-connection.ts does), or on
 * every call.
 */
export async function bareVariant(db: string, id: string, label: string, prepared: boolean): Promise<CycleVariant> {
  const queue = await QueueDb.open(db);
  const bare = await openBare(db);
  const clock = new StatementClock();
  clock.wrap(bare.handle as unknown as Record<string, unknown>);
  const executor = prepared ? preparedExecutor(bare) : unpreparedExecutor(bare);
  const cycle = sqlCycle((work) => inTransaction(bare, () => work(executor)));
  return variant(id, label, queue, clock, cycle, async () => {
    await executor.release();
    await bare.close();
    await queue.close();
  });
}

/** A stand-in for knex where the store's functions only call `raw(sql, bindings)`. */
export type BareExecutor = Executor & { release(): Promise<void> };

export function unpreparedExecutor(bare: BareDb): BareExecutor {
  return {
    raw: (sql: string, bindings: unknown[]) => bare.all(sql, bindings),
    release: async () => undefined,
  } as unknown as BareExecutor;
}

/** Each distinct statement prepared once and reused, as platform/sqlite-connection.ts does. */
export function preparedExecutor(bare: BareDb): BareExecutor {
  const statements = new Map<string, sqlite3.Statement>();
  const raw = (sql: string, bindings: unknown[]) => {
    let statement = statements.get(sql);
    if (!statement) statements.set(sql, (statement = bare.handle.prepare(sql, () => undefined)));
    return new Promise<unknown[]>((resolve, reject) =>
      statement.all(bindings, (err: Error | null, rows: unknown[]) => (err ? reject(err) : resolve(rows))),
    );
  };
  const release = async () => {
    for (const statement of statements.values())
      await new Promise((resolve) => statement.finalize(() => resolve(undefined)));
  };
  return { raw, release } as unknown as BareExecutor;
}

export async function inTransaction<T>(db: BareDb, work: () => Promise<T>): Promise<T> {
  await db.run('BEGIN IMMEDIATE');
  try {
    const value = await work();
    await db.run('COMMIT');
    return value;
  } catch (err) {
    await db.run('ROLLBACK').catch(() => undefined);
    throw err;
  }
}
