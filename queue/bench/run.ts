// One benchmark run: open every probe, then round after round measure the limit first and
// every column after it in the same order, so a slow moment on the machine hits all columns
// of that round alike; ratios are taken within a round.
import { mkdirSync, mkdtempSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { SQLITE_VERSION } from './bare-sqlite.js';
import { openLatencyProbe, type LatencySample } from './latency.js';
import { openLibraryFleetProbe, openLibraryProbe, type ThroughputProbe } from './library.js';
import { openBareLimit, openKnexLimit } from './limit.js';
import { perSecond } from './loops.js';
import { interleave, type RoundContext, type Throughput } from './measure.js';
import type { BenchOptions } from './options.js';
import { openEndToEndProbe, openHttpProbe, System } from './services.js';

/** A throughput column: how to open it; `pg` columns exist only with --postgres. */
interface ColumnSpec {
  id: string;
  label: string;
  open(dir: string): Promise<ThroughputProbe>;
}

export interface RoundRecord {
  round: number;
  limit: Throughput;
  limitKnex: Throughput;
  columns: Record<string, Throughput>;
  latency: LatencySample;
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
  startedAt: string;
  durationMs: number;
}

function columnSpecs(options: BenchOptions, system: () => System): ColumnSpec[] {
  const n = options.workers;
  const specs: ColumnSpec[] = [
    { id: 'library1', label: 'queue library, 1 worker', open: (dir) => openLibraryProbe(join(dir, 'library1.sqlite'), 1, 'lib1') },
    { id: 'libraryN', label: `queue library, ${n} loops in 1 process`, open: (dir) => openLibraryProbe(join(dir, 'libraryN.sqlite'), n, 'libN') },
    {
      id: 'libraryNp',
      label: `queue library, ${n} processes`,
      open: (dir) => openLibraryFleetProbe(join(dir, 'libraryNp.sqlite'), n, 'libNp'),
    },
    { id: 'http1', label: 'queue over HTTP, 1 worker', open: (dir) => openHttpProbe(join(dir, 'http1.sqlite'), 1, 'http1') },
    { id: 'httpN', label: `queue over HTTP, ${n} loops`, open: (dir) => openHttpProbe(join(dir, 'httpN.sqlite'), n, 'httpN') },
    { id: 'e2e', label: `end to end, ${n} worker processes`, open: () => openEndToEndProbe(system(), n, 'e2e') },
  ];
  const pg = options.postgres;
  if (pg) {
    specs.push(
      { id: 'pgLibrary1', label: 'PostgreSQL: queue library, 1 worker', open: () => openLibraryProbe(pg, 1, 'pg1') },
      { id: 'pgLibraryN', label: `PostgreSQL: queue library, ${n} loops`, open: () => openLibraryProbe(pg, n, 'pgN') },
    );
  }
  return specs;
}

/** A fresh folder for one run's databases, under the chosen parent. */
export function makeRunDir(options: BenchOptions): string {
  mkdirSync(options.baseDir, { recursive: true });
  return mkdtempSync(join(options.baseDir, 'leasehold-bench-'));
}

export async function runBench(options: BenchOptions, dir: string, progress: (line: string) => void): Promise<RunRecord> {
  const started = Date.now();
  const closers: (() => Promise<void> | void)[] = [];
  try {
    const limit = await openBareLimit(join(dir, 'limit.sqlite'));
    closers.push(() => limit.close());
    const limitKnex = await openKnexLimit(join(dir, 'limit-knex.sqlite'));
    closers.push(() => limitKnex.close());
    const system = await System.start(dir);
    closers.push(() => system.stop());
    const specs = columnSpecs(options, () => system);
    const probes: ThroughputProbe[] = [];
    for (const spec of specs) {
      const probe = await spec.open(dir);
      probes.push(probe);
      closers.push(() => probe.close());
    }
    const latency = openLatencyProbe(system, options.samples);
    closers.push(() => latency.close());

    const rounds: RoundRecord[] = [];
    let limitTxPerSec = perSecond(await limit.slice(Math.min(options.windowMs, 500)));
    for (let round = 1; round <= options.rounds; round++) {
      const ctx: RoundContext = { round, windowMs: options.windowMs, limitTxPerSec, backlog: options.backlog };
      const [limitResult, knexResult, ...results] = await interleave([limit, limitKnex, ...probes], ctx, options.sliceMs);
      limitTxPerSec = limitResult!.perSec;
      const columns: Record<string, Throughput> = {};
      specs.forEach((spec, i) => (columns[spec.id] = results[i]!));
      const lat = await latency.measure(round);
      rounds.push({ round, limit: limitResult!, limitKnex: knexResult!, columns, latency: lat });
      progress(progressLine(round, options.rounds, limitResult!, columns, lat));
    }
    const peaks: Record<string, number | null> = {};
    for (const probe of probes) {
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
      startedAt: new Date(started).toISOString(),
      durationMs: Date.now() - started,
    };
  } finally {
    for (const close of closers.reverse()) await Promise.resolve(close()).catch(() => undefined);
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

function progressLine(round: number, of: number, limit: Throughput, columns: Record<string, Throughput>, lat: LatencySample): string {
  const cols = Object.entries(columns)
    .map(([id, t]) => `${id} ${t.perSec.toFixed(0)}${t.errors ? ` (${t.errors} errors: ${t.firstError})` : ''}`)
    .join(', ');
  return `round ${round}/${of}: limit ${limit.perSec.toFixed(0)} tx/s; ${cols} jobs/s; send p50 ${lat.gatewayP50Ms.toFixed(2)} ms vs direct ${lat.directP50Ms.toFixed(2)} ms`;
}
