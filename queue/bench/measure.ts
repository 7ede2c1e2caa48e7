// What one timed window reports, and the queue databases the windows run on: a migrated store
// opened by the benchmark itself, used to top up jobs and to count durable commits.
import type { Knex } from 'knex';
import type { KnexQueueStore } from '../knex-store.js';
import { openQueueStore } from '../service.js';
import type { QueueStore } from '../store.js';
import { changeCounter } from './bare-sqlite.js';
import { perSecond, type LoopResult } from './loops.js';
import { topUp } from './seed.js';

export interface Throughput {
  /** Jobs (or, for the limit, transactions) completed per second. */
  perSec: number;
  jobs: number;
  elapsedMs: number;
  /** Durable write transactions per job, from the database's commit counter. */
  txPerJob: number | null;
  /** SQL statements sent per job, where the benchmark sees them (in-process knex). */
  statementsPerJob: number | null;
  drained: boolean;
  errors: number;
  firstError?: string;
}

export interface RoundContext {
  round: number;
  windowMs: number;
  /** This round's raw limit, to size the jobs a window may consume. */
  limitTxPerSec: number;
  /** Pending jobs left over at the end of a window, on top of what the window can consume. */
  backlog: number;
}

/** Jobs a window could consume at one job per raw transaction (twice a two-commit cycle). */
export function capacity(ctx: RoundContext): number {
  return Math.ceil((ctx.limitTxPerSec * ctx.windowMs) / 1000) + 50;
}

export function throughput(result: LoopResult, commits: number | null, statements: number | null = null): Throughput {
  const per = (n: number | null) => (n === null || result.jobs === 0 ? null : n / result.jobs);
  return {
    perSec: perSecond(result),
    jobs: result.jobs,
    elapsedMs: result.elapsedMs,
    txPerJob: per(commits),
    statementsPerJob: per(statements),
    drained: result.drained,
    errors: result.errors,
    ...(result.firstError ? { firstError: result.firstError } : {}),
  };
}

/** A queue database seen from the benchmark: the same store the services open, migrated. */
export class QueueDb {
  private constructor(
    readonly db: string,
    readonly store: QueueStore,
  ) {}

  static async open(db: string): Promise<QueueDb> {
    return new QueueDb(db, await openQueueStore({ db }));
  }

  get knex(): Knex {
    return (this.store as KnexQueueStore).knex;
  }

  /** Committed write transactions so far (SQLite file change counter), or null if unknown. */
  commits(): Promise<number | null> {
    return this.db.includes('://') ? Promise.resolve(null) : changeCounter(this.db);
  }

  /** Makes `backlog` + what the window can consume pending, before the window starts. */
  prepare(ctx: RoundContext, label: string): Promise<number> {
    return topUp(this.knex, ctx.backlog + capacity(ctx), label);
  }

  close(): Promise<void> {
    return this.store.close();
  }
}

/** Commits between two counter readings, null when either is unknown. */
export function delta(before: number | null, after: number | null): number | null {
  return before === null || after === null ? null : after - before;
}
