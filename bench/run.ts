// One benchmark run: open every column, then round after round measure them all, taking turns
// in short slices with the limit first, so a slow moment on the machine hits every column of
// the round alike; ratios are taken within a round.
import { mkdirSync, mkdtempSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { SQLITE_VERSION } from './bare-sqlite.js';
import { openLatencyProbe, type LatencySample } from './latency.js';
import { openLibraryFleetProbe, openLibraryProbe, type ThroughputProbe } from './library.js';
import { openBareLimit, openKnexLimit, type LimitProbe } from './limit.js';
import { perSecond } from './loops.js';
import { interleave, type RoundContext, type Throughput } from './measure.js';
import type { BenchOptions } from './options.js';
import { PostgresSchemas, openPostgresLimit } from './postgres.js';
import { openEndToEndProbe, openHttpProbe, System } from './services.js';
import { openWorkerCliProbe } from './worker-cli.js';

export interface RoundRecord {
  round: number;
  /** By column id; `limit` is the raw SQLite limit, `pgLimit` PostgreSQL's. */
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

/** What the columns are opened with; systems start on first use and are shared. */
interface Resources {
  dir: string;
  system(): Promise<System>;
  pg: { schemas: PostgresSchemas; system(): Promise<System> } | null;
}

interface ColumnSpec {
  id: string;
  label: string;
  open(r: Resources): Promise<ThroughputProbe>;
}

function asColumn(limit: LimitProbe): ThroughputProbe {
  return { prepare: limit.prepare, slice: limit.slice, peaks: () => ({}), close: limit.close };
}

function columnSpecs(options: BenchOptions): ColumnSpec[] {
  const n = options.workers;
  const specs: ColumnSpec[] = [
    {
      id: 'limit',
      label: 'limit: bare sqlite3 write transactions',
      open: async (r) => asColumn(await openBareLimit(join(r.dir, 'limit.sqlite'))),
    },
    {
      id: 'limitKnex',
      label: 'the same transaction through knex',
      open: async (r) => asColumn(await openKnexLimit(join(r.dir, 'limit-knex.sqlite'))),
    },
    {
      id: 'library1',
      label: 'queue library, 1 worker',
      open: (r) => openLibraryProbe(join(r.dir, 'library1.sqlite'), 1, 'lib1'),
    },
    {
      id: 'libraryN',
      label: `queue library, ${n} loops in 1 process`,
      open: (r) => openLibraryProbe(join(r.dir, 'libraryN.sqlite'), n, 'libN'),
    },
    {
      id: 'libraryNp',
      label: `queue library, ${n} processes`,
      open: (r) => openLibraryFleetProbe(join(r.dir, 'libraryNp.sqlite'), n, 'libNp'),
    },
    {
      id: 'http1',
      label: 'queue over HTTP, 1 worker',
      open: (r) => openHttpProbe(join(r.dir, 'http1.sqlite'), 1, 'http1'),
    },
    {
      id: 'httpN',
      label: `queue over HTTP, ${n} loops`,
      open: (r) => openHttpProbe(join(r.dir, 'httpN.sqlite'), n, 'httpN'),
    },
    {
      id: 'http1Logged',
      label: 'queue over HTTP, 1 worker, logging at info to a file',
      open: (r) =>
        openHttpProbe(join(r.dir, 'http1Logged.sqlite'), 1, 'http1log', 'service', {
          level: 'info',
          file: join(r.dir, 'queue-info.log'),
        }),
    },
    {
      id: 'bareHttp1',
      label: 'reference: the store behind bare node:http, 1 worker',
      open: (r) => openHttpProbe(join(r.dir, 'bareHttp1.sqlite'), 1, 'bare1', 'bare'),
    },
    {
      id: 'bareHttpN',
      label: `reference: the store behind bare node:http, ${n} loops`,
      open: (r) => openHttpProbe(join(r.dir, 'bareHttpN.sqlite'), n, 'bareN', 'bare'),
    },
    {
      id: 'e2e',
      label: `end to end, ${n} worker processes`,
      open: async (r) => openEndToEndProbe(await r.system(), n, 'e2e'),
    },
    {
      id: 'e2eWorker',
      label: `end to end, ${n} \`leasehold worker\` processes`,
      open: async (r) => openWorkerCliProbe(await r.system(), n, 'e2eWorker'),
    },
  ];
  if (options.postgres) {
    const pg = (r: Resources) => r.pg!;
    specs.push(
      {
        id: 'pgLimit',
        label: 'PostgreSQL limit: bare pg write transactions',
        open: async (r) => asColumn(await openPostgresLimit(pg(r).schemas.urlFor('limit'))),
      },
      {
        id: 'pgLibrary1',
        label: 'PostgreSQL: queue library, 1 worker',
        open: (r) => openLibraryProbe(pg(r).schemas.urlFor('lib1'), 1, 'pg1'),
      },
      {
        id: 'pgLibraryN',
        label: `PostgreSQL: queue library, ${n} loops in 1 process`,
        open: (r) => openLibraryProbe(pg(r).schemas.urlFor('libn'), n, 'pgN'),
      },
      {
        id: 'pgE2e',
        label: `PostgreSQL: end to end, ${n} worker processes`,
        open: async (r) => openEndToEndProbe(await pg(r).system(), n, 'pgE2e'),
      },
    );
  }
  return specs;
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
  const resources: Resources = {
    dir,
    system: once(
      () => System.start(dir),
      (s) => closers.push(() => s.stop()),
    ),
    pg: schemas && {
      schemas,
      system: once(
        () => System.start(dir, { queue: schemas.urlFor('e2e_queue'), receiver: schemas.urlFor('e2e_receiver') }),
        (s) => closers.push(() => s.stop()),
      ),
    },
  };
  try {
    const specs = columnSpecs(options);
    const probes: ThroughputProbe[] = [];
    for (const spec of specs) {
      const probe = await spec.open(resources);
      probes.push(probe);
      closers.push(() => probe.close());
    }
    const latency = await openLatencyProbe(await resources.system(), options.samples);
    closers.push(() => latency.close());

    const rounds: RoundRecord[] = [];
    const limitIds = ['limit', 'pgLimit'];
    let limitTxPerSec = perSecond(await probes[0]!.slice(Math.min(options.windowMs, 500)));
    for (let round = 1; round <= options.rounds; round++) {
      const ctx: RoundContext = { round, windowMs: options.windowMs, limitTxPerSec, backlog: options.backlog };
      const results = await interleave(probes, ctx, options.sliceMs);
      const columns: Record<string, Throughput> = {};
      specs.forEach((spec, i) => (columns[spec.id] = results[i]!));
      limitTxPerSec = Math.max(...limitIds.map((id) => columns[id]?.perSec ?? 0));
      const lat = await latency.measure(round);
      rounds.push({ round, columns, latency: lat });
      progress(progressLine(round, options.rounds, columns, lat));
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

function progressLine(round: number, of: number, columns: Record<string, Throughput>, lat: LatencySample): string {
  const cols = Object.entries(columns)
    .map(([id, t]) => `${id} ${t.perSec.toFixed(0)}${t.errors ? ` (${t.errors} errors: ${t.firstError})` : ''}`)
    .join(', ');
  return `round ${round}/${of}: ${cols} per s; send p50 ${lat.gatewayP50Ms.toFixed(2)} ms (bare gateway ${lat.bareGatewayP50Ms.toFixed(2)}) vs direct ${lat.directP50Ms.toFixed(2)} ms`;
}
