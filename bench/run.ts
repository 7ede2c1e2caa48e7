// One benchmark run: open every column, then round after round measure them all, taking turns
// in short slices with the limit first and again just before each other column's slice, so a
// slow moment on the machine hits every column of the round alike; ratios are taken within a
// round. After each round's columns, the latency probes.
import { mkdirSync, mkdtempSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { SQLITE_VERSION } from './bare-sqlite.js';
import { openLatencyProbe, type LatencySample } from './latency.js';
import { columnSpecs, type Resources } from './columns.js';
import type { ThroughputProbe } from './library.js';
import { perSecond } from './loops.js';
import { interleave, type RoundContext, type Throughput } from './measure.js';
import type { BenchOptions } from './options.js';
import { openPickupProbe, type PickupSample } from './pickup.js';
import { PostgresSchemas } from './postgres.js';
import { System } from './services.js';

export interface RoundRecord {
  round: number;
  /** By column id; `limit` is the raw SQLite limit (rollback journal), `pgLimit` PostgreSQL's. */
  columns: Record<string, Throughput>;
  latency: LatencySample;
  /** Pickup latency by journal. */
  pickup: Record<string, PickupSample>;
}

export interface RunRecord {
  options: BenchOptions;
  dir: string;
  environment: { node: string; sqlite: string; cpus: number; cpuModel: string; platform: string };
  columns: { id: string; label: string }[];
  rounds: RoundRecord[];
  /** Peak resident memory (VmHWM) of each child process kind, MiB. */
  peaks: Record<string, number | null>;
  benchPeakRssMiB: number;
  /** Notes on how a column was run (a flag this build lacks, say). */
  notes: string[];
  startedAt: string;
  durationMs: number;
}

/** A fresh folder for one run's databases, under the chosen parent. */
export function makeRunDir(options: BenchOptions): string {
  mkdirSync(options.baseDir, { recursive: true });
  return mkdtempSync(join(options.baseDir, 'leasehold-bench-'));
}

function once<T>(make: () => Promise<T>, onMade: (value: T) => void): () => Promise<T> {
  let made: Promise<T> | undefined;
  return () => (made ??= make().then((value) => (onMade(value), value)));
}

/** What an interrupted run must still undo outside its folder: the PostgreSQL schemas it made. */
let undoOnInterrupt: (() => Promise<void>) | null = null;

/** For a SIGINT/SIGTERM handler, once the child processes are gone: drops the run's schemas, if any. */
export function cleanUpInterruptedRun(): Promise<void> {
  return undoOnInterrupt?.() ?? Promise.resolve();
}

export async function runBench(
  options: BenchOptions,
  dir: string,
  progress: (line: string) => void,
): Promise<RunRecord> {
  const started = Date.now();
  const closers: (() => Promise<void> | void)[] = [];
  const schemas = options.postgres ? new PostgresSchemas(options.postgres) : null;
  if (schemas && !options.keep) {
    closers.push(() => schemas.dropAll());
    undoOnInterrupt = () => schemas.dropAll();
  }
  const systems: System[] = [];
  const onStarted = (s: System) => {
    systems.push(s);
    closers.push(() => s.stop());
  };
  const resources: Resources = {
    dir,
    system: once(() => System.start(dir, 'e2e'), onStarted),
    workerSystem: once(() => System.start(dir, 'e2e-worker'), onStarted),
    pg: schemas && { schemas },
  };
  const notes: string[] = [];
  try {
    const specs = columnSpecs(options, notes);
    // Started together, so the services' start-up overlaps; closed whether or not all started.
    const opened = await Promise.allSettled([
      ...specs.map((spec) => spec.open(resources)),
      openPickupProbe(join(dir, 'pickup.sqlite'), 'delete'),
      openPickupProbe(join(dir, 'pickup-wal.sqlite'), 'wal'),
    ]);
    for (const result of opened) if (result.status === 'fulfilled') closers.push(() => result.value.close());
    const failed = opened.find((result) => result.status === 'rejected');
    if (failed) throw (failed as PromiseRejectedResult).reason;
    const probes = opened.slice(0, specs.length).map((r) => (r as PromiseFulfilledResult<ThroughputProbe>).value);
    const pickups = opened
      .slice(specs.length)
      .map((r) => (r as PromiseFulfilledResult<Awaited<ReturnType<typeof openPickupProbe>>>).value);
    const latency = await openLatencyProbe(await resources.system(), options.samples);
    closers.push(() => latency.close());
    progress(`${specs.length} columns and their services started in ${((Date.now() - started) / 1000).toFixed(1)} s`);

    const rounds: RoundRecord[] = [];
    const limitIds = ['limit', 'pgLimit'];
    let limitTxPerSec = perSecond(await probes[0]!.slice(Math.min(options.windowMs, 500)));
    /** Every column in turn for one round's window; `round` 0 for a warm-up round. */
    const columnsOf = async (round: number): Promise<Record<string, Throughput>> => {
      const ctx: RoundContext = { round, windowMs: options.windowMs, limitTxPerSec, backlog: options.backlog };
      // PostgreSQL's columns are ratios of PostgreSQL's limit, which runs once per pass.
      const results = await interleave(
        probes,
        ctx,
        options.sliceMs,
        options.pairMs,
        (i) => specs[i]!.paired !== false && !specs[i]!.id.startsWith('pg'),
        (i) => specs[i]?.minSliceMs ?? 0,
      );
      const columns: Record<string, Throughput> = {};
      specs.forEach((spec, i) => (columns[spec.id] = results[i]!));
      limitTxPerSec = Math.max(...limitIds.map((id) => columns[id]?.perSec ?? 0));
      return columns;
    };
    // Not counted: a process measured in its first seconds runs code not yet compiled, and the
    // columns would not start alike (in-process ones share the benchmark's warmed code).
    for (let warmUp = 1; warmUp <= options.warmUpRounds; warmUp++) {
      const warmUpStarted = Date.now();
      const columns = await columnsOf(0);
      progress(
        `warm-up ${warmUp}/${options.warmUpRounds}, not counted: ${columnList(columns)} per s; took ${((Date.now() - warmUpStarted) / 1000).toFixed(1)} s`,
      );
    }
    for (let round = 1; round <= options.rounds; round++) {
      const roundStarted = Date.now();
      const columns = await columnsOf(round);
      const columnsMs = Date.now() - roundStarted;
      const lat = await latency.measure(round);
      const pickup: Record<string, PickupSample> = {};
      for (const probe of pickups) pickup[probe.journal] = await probe.measure(options.pickupSamples);
      rounds.push({ round, columns, latency: lat, pickup });
      progress(progressLine(round, options.rounds, columns, lat, pickup));
      progress(
        `  round ${round} took ${((Date.now() - roundStarted) / 1000).toFixed(1)} s, the columns ${(columnsMs / 1000).toFixed(1)} s`,
      );
    }
    const peaks: Record<string, number | null> = {};
    for (const probe of [...probes, ...pickups, latency, ...systems]) {
      for (const [name, value] of Object.entries(probe.peaks())) peaks[name] = maxOf(peaks[name] ?? null, value);
    }
    return {
      options,
      dir,
      environment: environment(),
      columns: specs.map(({ id, label }) => ({ id, label })),
      rounds,
      peaks,
      benchPeakRssMiB: process.resourceUsage().maxRSS / 1024,
      notes,
      startedAt: new Date(started).toISOString(),
      durationMs: Date.now() - started,
    };
  } finally {
    for (const close of closers.reverse()) await Promise.resolve(close()).catch(() => undefined);
    undoOnInterrupt = null;
  }
}

function maxOf(a: number | null, b: number | null): number | null {
  if (a === null) return b;
  if (b === null) return a;
  return Math.max(a, b);
}

function environment(): RunRecord['environment'] {
  const cpu = cpus();
  return {
    node: process.version,
    sqlite: SQLITE_VERSION,
    cpus: cpu.length,
    cpuModel: cpu[0]?.model ?? 'unknown',
    platform: `${process.platform} ${process.arch}`,
  };
}

/** `id perSec` for each column, with its errors. */
function columnList(columns: Record<string, Throughput>): string {
  return Object.entries(columns)
    .map(([id, t]) => `${id} ${t.perSec.toFixed(0)}${t.errors ? ` (${t.errors} errors: ${t.firstError})` : ''}`)
    .join(', ');
}

function progressLine(
  round: number,
  of: number,
  columns: Record<string, Throughput>,
  lat: LatencySample,
  pickup: Record<string, PickupSample>,
): string {
  const cols = columnList(columns);
  const picked = Object.entries(pickup)
    .map(
      ([journal, p]) =>
        `${journal} ${p.afterEnqueueP50Ms.toFixed(2)} ms${p.errors ? ` (${p.errors} errors: ${p.firstError})` : ''}`,
    )
    .join(', ');
  return `round ${round}/${of}: ${cols} per s; send p50 ${lat.gatewayP50Ms.toFixed(2)} ms vs direct ${lat.directP50Ms.toFixed(2)} ms; pickup p50 ${picked}`;
}
