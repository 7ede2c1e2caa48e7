// What one timed window reports, how the columns take turns in a round (interleave), and the
// queue databases the windows run on: a migrated store opened by the benchmark itself, used to
// top up jobs between windows.
import type { Knex } from 'knex';
import { openQueueStore, type QueueStore } from '../queue/index.js';
import { openPostgres, parsePostgresUrl } from '../platform/postgres.js';
import { openSqlite, type SqliteDatabase, type SqliteJournal } from '../platform/sqlite.js';
import { perSecond, type LoopResult } from './loops.js';
import { cpuTotal, sqliteCommits, type ByKind, type Meter } from './meters.js';
import { topUp } from './seed.js';

export interface Throughput {
  /** Jobs (or, for a limit, transactions) completed per second. */
  perSec: number;
  jobs: number;
  elapsedMs: number;
  /** Durable write transactions per job. */
  txPerJob: number | null;
  /** Statements handed to the database drivers per job, in every process that serves the column. */
  statementsPerJob: number | null;
  /** HTTP requests the column's services received per job. */
  requestsPerJob: number | null;
  /** CPU time per job of every process the column runs on (services, workers, client loops). */
  cpuMsPerJob: number | null;
  /** The same by kind of process (`queue`, `gateway`, `benchmark process`...). */
  cpuMsPerJobBy: ByKind;
  /** Requests per job by the service that received them. */
  requestsPerJobBy: ByKind;
  drained: boolean;
  errors: number;
  firstError?: string;
  /** The limit's rate measured just before each of this column's slices (interleave's `pairMs`). */
  pairedLimitPerSec?: number;
}

export interface RoundContext {
  round: number;
  /** Measured time per column: the round's in interleave(), one slice's in Probe.prepare(). */
  windowMs: number;
  /** The latest raw SQLite limit, to size the jobs a slice may consume before it has run once. */
  limitTxPerSec: number;
  /** Pending jobs kept beyond what a slice can consume. */
  backlog: number;
}

/** One slice of a round: loops run for the slice, with what the counters saw meanwhile. */
export interface SliceResult extends LoopResult {
  /** Jobs the counters' readings cover, where more than `jobs` (those that ended after the window). */
  jobsCounted?: number;
  transactions: number | null;
  statements: number | null;
  requests: number | null;
  cpu: ByKind;
  requestsBy: ByKind;
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

export function combine(slices: SliceResult[]): Throughput {
  const jobs = slices.reduce((sum, s) => sum + s.jobs, 0);
  const elapsedMs = slices.reduce((sum, s) => sum + s.elapsedMs, 0);
  const total = (pick: (s: SliceResult, i: number) => number | null) =>
    slices.some((s, i) => pick(s, i) === null) ? null : slices.reduce((sum, s, i) => sum + pick(s, i)!, 0);
  const counted = slices.reduce((sum, s) => sum + (s.jobsCounted ?? s.jobs), 0);
  const per = (n: number | null) => (n === null || counted === 0 ? null : n / counted);
  const perKind = (maps: ByKind[]): ByKind =>
    Object.fromEntries(
      [...new Set(maps.flatMap((m) => Object.keys(m)))].map((kind) => [
        kind,
        per(total((_, i) => maps[i]![kind] ?? null)),
      ]),
    );
  const firstError = slices.find((s) => s.firstError)?.firstError;
  return {
    perSec: perSecond({ jobs, elapsedMs }),
    jobs,
    elapsedMs,
    txPerJob: per(total((s) => s.transactions)),
    statementsPerJob: per(total((s) => s.statements)),
    requestsPerJob: per(total((s) => s.requests)),
    cpuMsPerJob: per(total((s) => cpuTotal(s.cpu))),
    cpuMsPerJobBy: perKind(slices.map((s) => s.cpu)),
    requestsPerJobBy: perKind(slices.map((s) => s.requestsBy)),
    drained: slices.some((s) => s.drained),
    errors: slices.reduce((sum, s) => sum + s.errors, 0),
    ...(firstError ? { firstError } : {}),
  };
}

/**
 * Measures `probes` for one round: `ctx.windowMs` each, in slices taken in turn. With `pairMs`,
 * `probes[0]` (the limit) also runs `pairMs` just before each slice of every `paired` probe, and
 * that probe's `pairedLimitPerSec` is the limit's rate in those moments: on a machine whose
 * disk speeds up and slows down from one second to the next, the fairest limit to divide by.
 * `minSliceMs`: a probe's shortest slice (its slices are then fewer and longer).
 */
export async function interleave(
  probes: Probe[],
  ctx: RoundContext,
  sliceMs: number,
  pairMs = 0,
  paired: (index: number) => boolean = (index) => index > 0,
  minSliceMs: (index: number) => number = () => 0,
): Promise<Throughput[]> {
  const slices: SliceResult[][] = probes.map(() => []);
  const pairs: SliceResult[][] = probes.map(() => []);
  const count = Math.max(1, Math.round(ctx.windowMs / sliceMs));
  const slice: RoundContext = { ...ctx, windowMs: ctx.windowMs / count };
  // A probe whose slices must be longer runs every `span`-th pass, `span` slices' worth at a time:
  // the same time per round, in fewer and longer slices (never longer than the round's window).
  const spans = probes.map((_, p) => Math.min(count, Math.max(1, Math.ceil(minSliceMs(p) / slice.windowMs))));
  for (let i = 0; i < count; i++) {
    for (let p = 0; p < probes.length; p++) {
      const span = spans[p]!;
      if (i % span !== 0) continue;
      const passes = Math.min(span, count - i);
      const long: RoundContext = { ...slice, windowMs: slice.windowMs * passes };
      await probes[p]!.prepare(long);
      if (pairMs > 0 && p > 0 && paired(p)) {
        const pair = await probes[0]!.slice(pairMs);
        pairs[p]!.push(pair);
        slices[0]!.push(pair);
      }
      slices[p]!.push(await probes[p]!.slice(long.windowMs));
    }
  }
  return slices.map((s, p) => {
    const throughput = combine(s);
    return pairs[p]!.length > 0 ? { ...throughput, pairedLimitPerSec: combine(pairs[p]!).perSec } : throughput;
  });
}

/**
 * A queue database seen from the benchmark: the same store the services open, migrated, and a
 * handle of the benchmark's own (opened through platform/) for the few statements it sends
 * itself, such as parking pending jobs.
 */
export class QueueDb {
  private own: { knex: Knex; close(): Promise<void> } | undefined;

  private constructor(
    readonly db: string,
    readonly journal: SqliteJournal,
    readonly store: QueueStore,
  ) {}

  /** `journal`: how the services open it, so that this handle does not switch the file's mode. */
  static async open(db: string, journal: SqliteJournal = 'delete'): Promise<QueueDb> {
    return new QueueDb(db, journal, await openQueueStore({ db, journal }));
  }

  get isPostgres(): boolean {
    return /^postgres(ql)?:\/\//i.test(this.db);
  }

  /** Runs one statement of the benchmark's own on the database (its queue_jobs table). */
  async execute(sql: string, bindings: readonly Knex.Value[] = []): Promise<void> {
    this.own ??= this.isPostgres
      ? ownPostgres(this.db)
      : ownSqlite(openSqlite({ filename: this.db, journal: this.journal }));
    await this.own.knex.raw(sql, bindings);
  }

  /** Durable commits on the file from any process; on PostgreSQL, give none (the processes count theirs). */
  get commits(): Meter {
    return this.isPostgres ? async () => ({}) : sqliteCommits(this.db, this.journal);
  }

  /** Makes `pending` jobs pending, before a slice starts; new ones claimable at `runAt` (default now). */
  async topUp(pending: number, label: string, runAt?: number): Promise<void> {
    await topUp(this.store, pending, label, runAt);
  }

  async close(): Promise<void> {
    await this.own?.close();
    await this.store.close();
  }
}

function ownSqlite(db: SqliteDatabase) {
  return { knex: db.knex, close: () => db.close() };
}

function ownPostgres(url: string) {
  const knex = openPostgres(parsePostgresUrl(url));
  return { knex, close: () => knex.destroy() };
}

/**
 * How many jobs to have pending before a slice: the backlog plus what the slice could consume,
 * judged by the column's last slice (half as much again), or before it has run by `guess`
 * jobs per raw limit transaction.
 */
export class Sizing {
  private lastPerSec = 0;

  constructor(private readonly guess: number) {}

  pending(slice: RoundContext): number {
    const rate = Math.max(this.lastPerSec * 1.5, this.lastPerSec === 0 ? slice.limitTxPerSec * this.guess : 0);
    return slice.backlog + Math.ceil((rate * slice.windowMs) / 1000) + 20;
  }

  observe(result: LoopResult): void {
    this.lastPerSec = perSecond(result);
  }
}
