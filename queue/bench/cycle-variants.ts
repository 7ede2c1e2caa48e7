// One claim + finish cycle, several ways, each timed per statement inside the driver: the
// store as shipped; the store's own SQL (claimIn/finishIn) on the bare driver, without knex;
// on a schema without the `queue_jobs_status` index; and with prepared statements reused.
import { KnexQueueStore, claimIn, finishIn, type Executor } from '../knex-store.js';
import { sqliteDialect } from '../sqlite-store.js';
import type { QueueStore } from '../store.js';
import { systemClock } from '../types.js';
import type sqlite3 from 'sqlite3';
import { openBare, type BareDb } from './bare-sqlite.js';
import { runLoops, type Cycle } from './loops.js';
import { QueueDb, counted, type Probe } from './measure.js';
import { openSqliteWithStatementCache } from './prepared-client.js';
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
/** Without it SQLite's planner walks the partial indexes the claim was written for. */
export const NO_STATUS_INDEX: Schema = { changes: ['DROP INDEX IF EXISTS queue_jobs_status'] };

export function breakdownOf(clock: StatementClock, cycles: number, wallMs: number): Breakdown {
  const per = (n: number) => (cycles > 0 ? n / cycles : 0);
  return {
    cycles,
    wallMsPerCycle: per(wallMs),
    driverMsPerCycle: per(clock.driverMs()),
    statementsPerCycle: per(clock.statements()),
    kinds: [...clock.totals.entries()].map(([kind, t]) => ({ kind, callsPerCycle: per(t.calls), msPerCall: t.ms / t.calls })),
  };
}

/** A variant whose cycle runs on `queue`'s database, timed by `clock`. */
function variant(id: string, label: string, queue: QueueDb, clock: StatementClock, cycle: Cycle, close: () => Promise<void>): CycleVariant {
  let cycles = 0;
  let wallMs = 0;
  return {
    id,
    label,
    async prepare(slice) {
      // Statements sent while topping up are not the cycle's.
      clock.paused = true;
      try {
        await queue.prepare(slice, id);
      } finally {
        clock.paused = false;
      }
    },
    async slice(ms) {
      const statementsBefore = clock.statements();
      const result = await counted(() => queue.commits(), () => runLoops(1, ms, cycle), () => clock.statements() - statementsBefore);
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

function storeCycle(store: QueueStore): Cycle {
  return async () => {
    const lease = await store.claim(OWNER, LEASE_MS);
    if (!lease) return false;
    await store.finish(lease.id, { owner: OWNER, token: lease.token }, null);
    return true;
  };
}

async function openQueueFile(db: string, schema: Schema): Promise<QueueDb> {
  const queue = await QueueDb.open(db);
  for (const sql of schema.changes) await queue.knex.raw(sql);
  return queue;
}

/** store.claim + store.finish, the driver connection under knex wrapped with a clock. */
export async function storeVariant(db: string, schema: Schema, id: string, label: string): Promise<CycleVariant> {
  const queue = await openQueueFile(db, schema);
  const clock = new StatementClock();
  await clock.wrapKnex(queue.knex);
  return variant(id, label, queue, clock, storeCycle(queue.store), () => queue.close());
}

/**
 * The store's own claimIn/finishIn on the bare driver: the same SQL and transactions, no knex;
 * with `prepared`, each distinct statement is prepared once and reused.
 */
export async function bareVariant(db: string, schema: Schema, id: string, label: string, prepared = false): Promise<CycleVariant> {
  const queue = await openQueueFile(db, schema);
  const bare = await openBare(db);
  const clock = new StatementClock();
  clock.wrap(bare.handle as unknown as Record<string, unknown>);
  const statements = new Map<string, sqlite3.Statement>();
  const preparedAll = (sql: string, bindings: unknown[]) => {
    let statement = statements.get(sql);
    if (!statement) statements.set(sql, (statement = bare.handle.prepare(sql, () => undefined)));
    const started = performance.now();
    return new Promise<unknown[]>((resolve, reject) =>
      statement.all(bindings, (err: Error | null, rows: unknown[]) => {
        clock.record(sql, performance.now() - started);
        if (err) reject(err);
        else resolve(rows);
      }),
    );
  };
  const executor = { raw: prepared ? preparedAll : (sql: string, bindings: unknown[]) => bare.all(sql, bindings) } as unknown as Executor;
  const dialect = sqliteDialect(systemClock, 60_000);
  const cycle: Cycle = async () => {
    const lease = await inTransaction(bare, () => claimIn(executor, dialect, OWNER, LEASE_MS, Date.now()));
    if (!lease) return false;
    await inTransaction(bare, () => finishIn(executor, 'reject', lease.id, { owner: OWNER, token: lease.token }, null, Date.now()));
    return true;
  };
  return variant(id, label, queue, clock, cycle, async () => {
    for (const statement of statements.values()) await new Promise((resolve) => statement.finalize(() => resolve(undefined)));
    await bare.close();
    await queue.close();
  });
}

/** store.claim + store.finish on a store whose knex client reuses prepared statements. */
export async function preparedStoreVariant(db: string, schema: Schema, id: string, label: string): Promise<CycleVariant> {
  const clock = new StatementClock();
  const knex = openSqliteWithStatementCache(db, (sql, ms) => clock.record(sql, ms));
  const store = new KnexQueueStore(knex, sqliteDialect(systemClock, 60_000));
  await store.migrate();
  for (const sql of schema.changes) await knex.raw(sql);
  return variant(id, label, QueueDb.wrap(db, store), clock, storeCycle(store), () => store.close());
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
