// What one timed window reports, and the queue databases the windows run on: a migrated store
// opened by the benchmark itself, used to top up jobs and to count durable commits.
import type { Knex } from 'knex';
import type { KnexQueueStore } from '../queue/knex-store.js';
import { openQueueStore, type QueueStore } from '../queue/index.js';
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
  /** Measured time per column: the round's in interleave(), one slice's in Probe.prepare(). */
  windowMs: number;
  /** The latest raw limit, to size the jobs a slice may consume. */
  limitTxPerSec: number;
  /** Pending jobs kept beyond what a slice can consume. */
  backlog: number;
}

/** One slice of a round: loops run for the slice, with the commits and statements seen. */
export interface SliceResult extends LoopResult {
  commits: number | null;
  statements: number | null;
}

/**
 * A column of the benchmark, measured in short slices that alternate with the other columns',
 * so that the machine's changing speed is shared by every column of the round. Before each
 * slice it is prepared: its queue topped up, untimed, so every slice starts with the same
 * backlog whatever the slice's length.
 */
export interface Probe {
  prepare(slice: RoundContext): Promise<void>;
  slice(ms: number): Promise<SliceResult>;
}

/** Jobs a slice could consume at one job per raw transaction (twice a two-commit cycle). */
export function capacity(slice: RoundContext): number {
  return Math.ceil((slice.limitTxPerSec * slice.windowMs * 1.25) / 1000) + 20;
}

export function combine(slices: SliceResult[]): Throughput {
  const jobs = slices.reduce((sum, s) => sum + s.jobs, 0);
  const elapsedMs = slices.reduce((sum, s) => sum + s.elapsedMs, 0);
  const total = (pick: (s: SliceResult) => number | null) =>
    slices.some((s) => pick(s) === null) ? null : slices.reduce((sum, s) => sum + pick(s)!, 0);
  const per = (n: number | null) => (n === null || jobs === 0 ? null : n / jobs);
  const firstError = slices.find((s) => s.firstError)?.firstError;
  return {
    perSec: perSecond({ jobs, elapsedMs }),
    jobs,
    elapsedMs,
    txPerJob: per(total((s) => s.commits)),
    statementsPerJob: per(total((s) => s.statements)),
    drained: slices.some((s) => s.drained),
    errors: slices.reduce((sum, s) => sum + s.errors, 0),
    ...(firstError ? { firstError } : {}),
  };
}

/** Measures `probes` for one round: `ctx.windowMs` each, in slices taken in turn. */
export async function interleave(probes: Probe[], ctx: RoundContext, sliceMs: number): Promise<Throughput[]> {
  const slices: SliceResult[][] = probes.map(() => []);
  const count = Math.max(1, Math.round(ctx.windowMs / sliceMs));
  const slice: RoundContext = { ...ctx, windowMs: ctx.windowMs / count };
  for (let i = 0; i < count; i++) {
    for (let p = 0; p < probes.length; p++) {
      await probes[p]!.prepare(slice);
      slices[p]!.push(await probes[p]!.slice(slice.windowMs));
    }
  }
  return slices.map(combine);
}

/** Runs `run` between two readings of a commit counter. */
export async function counted(
  commits: () => Promise<number | null>,
  run: () => Promise<LoopResult>,
  statements: () => number | null = () => null,
): Promise<SliceResult> {
  const before = await commits();
  const result = await run();
  return { ...result, commits: delta(before, await commits()), statements: statements() };
}

/** A queue database seen from the benchmark: the same store the services open, migrated. */
export class QueueDb {
  private ownCommits = 0;

  private constructor(
    readonly db: string,
    readonly store: QueueStore,
    /** Count the COMMITs this handle sends when the database keeps no counter (PostgreSQL). */
    private readonly countOwn: boolean,
  ) {
    if (this.isPostgres && countOwn) {
      this.knex.on('query', (q: { sql?: string }) => {
        if (/^\s*COMMIT/i.test(q.sql ?? '')) this.ownCommits++;
      });
    }
  }

  /**
   * `countOwnCommits`: the cycles run on this very handle, so on PostgreSQL its own COMMITs
   * are the cycles' transactions (SQLite's file counter sees every process anyway).
   */
  static async open(db: string, countOwnCommits = false): Promise<QueueDb> {
    return new QueueDb(db, await openQueueStore({ db }), countOwnCommits);
  }

  /** A store opened some other way (a prototype), on database `db`. */
  static wrap(db: string, store: QueueStore): QueueDb {
    return new QueueDb(db, store, true);
  }

  get isPostgres(): boolean {
    return /^postgres(ql)?:\/\//i.test(this.db);
  }

  get knex(): Knex {
    return (this.store as KnexQueueStore).knex;
  }

  /** Committed write transactions so far, or null when they cannot be counted here. */
  commits(): Promise<number | null> {
    if (!this.isPostgres) return changeCounter(this.db);
    return Promise.resolve(this.countOwn ? this.ownCommits : null);
  }

  /** Makes `backlog` + what the slice can consume pending, before the slice starts. */
  async prepare(slice: RoundContext, label: string): Promise<void> {
    await topUp(this.knex, slice.backlog + capacity(slice), label);
  }

  close(): Promise<void> {
    return this.store.close();
  }
}

/** Commits between two counter readings, null when either is unknown. */
export function delta(before: number | null, after: number | null): number | null {
  return before === null || after === null ? null : after - before;
}
