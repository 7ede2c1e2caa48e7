// Benchmark options: two presets (full and --quick), flags that override them, and where the
// databases go — a temporary folder on the same device as the repository, so the limit and
// the system are measured on the same disk.
import { statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ProfileOptions } from './profile.js';

export interface BenchFlags {
  quick?: boolean;
  json?: boolean;
  testkit?: boolean;
  waves?: boolean;
  rounds?: number;
  warmUpRounds?: number;
  windowMs?: number;
  sliceMs?: number;
  pairMs?: number;
  samples?: number;
  backlog?: number;
  workers?: number;
  e2eProcesses?: number;
  e2eConcurrency?: number;
  prefetch?: number | 'auto';
  references?: boolean;
  peers?: boolean;
  columns?: string;
  dir?: string;
  keep?: boolean;
  postgres?: string;
  profile?: boolean;
  profileOnly?: boolean;
  profileRounds?: number;
  cpuProfDir?: string;
  nodeFlags?: string;
  serviceLogLevel?: string;
}

export interface BenchOptions {
  preset: 'quick' | 'full';
  json: boolean;
  rounds: number;
  /**
   * Rounds run first and not counted: every column's processes load, fill their caches and have
   * their hot code compiled before anything is measured, so round 1 is not the cold one.
   */
  warmUpRounds: number;
  /** Measured time per column and round. */
  windowMs: number;
  /** Columns take turns in slices of about this long within a round. */
  sliceMs: number;
  /** The limit runs this long before each slice of every other column, to divide by (0: once per pass). */
  pairMs: number;
  /** Latency samples of each kind per round. */
  samples: number;
  /** Pickup samples per round and journal. */
  pickupSamples: number;
  backlog: number;
  /** Loops of the concurrent library and HTTP columns. */
  workers: number;
  /** `leasehold worker` processes end to end, and the jobs each runs at once. */
  e2eProcesses: number;
  /** Leases leasehold's peer columns hold beyond their concurrency (the worker's `prefetch`, by default `'auto'`). */
  prefetch: number | 'auto';
  e2eConcurrency: number;
  /** Also the reference columns, which explain the others: bare node:http, processes on one file, a minimal worker. */
  references: boolean;
  /** Also BullMQ, graphile-worker and the BullMQ + idempotency-key reference, beside leasehold's worker (peers/). */
  peers: boolean;
  /** Only these columns (and the limit), to profile one in isolation; null: all. */
  columns: string[] | null;
  /** Parent folder for this run's temporary folder. */
  baseDir: string;
  /** Why baseDir was chosen. */
  baseDirReason: string;
  keep: boolean;
  postgres: string | undefined;
  profile: ProfileOptions | null;
  /** Skip the main table: only the breakdown of the library cycle. */
  profileOnly: boolean;
}

export const PRESETS = {
  full: {
    rounds: 10,
    /** Enough for the end-to-end column's services to be mostly warm (docs/benchmarks.md, "Warm-up"). */
    warmUpRounds: 3,
    windowMs: 1_500,
    samples: 150,
    pickupSamples: 60,
    references: true,
    /** The breakdown of the library cycle runs after the table unless --no-profile. */
    profileByDefault: true,
    profile: { rounds: 6, windowMs: 1_000, backlogSizes: [100, 1_000, 10_000] },
  },
  quick: {
    rounds: 5,
    warmUpRounds: 1,
    windowMs: 300,
    samples: 40,
    pickupSamples: 20,
    references: false,
    /** Only with --profile: it would take the quick run past a minute. */
    profileByDefault: false,
    profile: { rounds: 2, windowMs: 400, backlogSizes: [100, 10_000] },
  },
} as const;

export const DEFAULT_BACKLOG = 1_000;
export const DEFAULT_SLICE_MS = 250;
export const DEFAULT_PAIR_MS = 100;
export const DEFAULT_WORKERS = 8;
export const DEFAULT_E2E_PROCESSES = 4;
export const DEFAULT_E2E_CONCURRENCY = 4;

export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

export function resolveOptions(flags: BenchFlags): BenchOptions {
  const preset = flags.quick ? 'quick' : 'full';
  const base = PRESETS[preset];
  const rounds = flags.rounds ?? base.rounds;
  const warmUpRounds = flags.warmUpRounds ?? base.warmUpRounds;
  const windowMs = flags.windowMs ?? base.windowMs;
  const sliceMs = Math.min(flags.sliceMs ?? DEFAULT_SLICE_MS, windowMs);
  const pairMs = flags.pairMs ?? DEFAULT_PAIR_MS;
  const samples = flags.samples ?? base.samples;
  const backlog = flags.backlog ?? DEFAULT_BACKLOG;
  const workers = flags.workers ?? DEFAULT_WORKERS;
  const e2eProcesses = flags.e2eProcesses ?? DEFAULT_E2E_PROCESSES;
  const e2eConcurrency = flags.e2eConcurrency ?? DEFAULT_E2E_CONCURRENCY;
  const prefetch = flags.prefetch ?? 'auto';
  if (rounds < 1) throw new RangeError(`--rounds must be at least 1, got ${rounds}.`);
  if (windowMs < 100) throw new RangeError(`--window-ms must be at least 100, got ${windowMs}.`);
  if (sliceMs < 50) throw new RangeError(`--slice-ms must be at least 50, got ${sliceMs}.`);
  if (pairMs !== 0 && pairMs < 20) throw new RangeError(`--pair-ms must be 0 or at least 20, got ${pairMs}.`);
  if (samples < 10) throw new RangeError(`--samples must be at least 10 (a p99 needs them), got ${samples}.`);
  if (backlog < 0) throw new RangeError(`--backlog must be 0 or more, got ${backlog}.`);
  if (workers < 2) throw new RangeError(`--workers must be at least 2, got ${workers}.`);
  if (e2eProcesses < 1) throw new RangeError(`--e2e-processes must be at least 1, got ${e2eProcesses}.`);
  if (e2eConcurrency < 1) throw new RangeError(`--e2e-concurrency must be at least 1, got ${e2eConcurrency}.`);
  if (prefetch !== 'auto' && prefetch + Math.max(workers, 1) > 100) {
    throw new RangeError(
      `--prefetch plus --workers must be at most 100 (a claim's limit), got ${prefetch} + ${workers}.`,
    );
  }
  if (flags.profile === false && flags.profileOnly)
    throw new RangeError('--profile-only and --no-profile contradict each other.');
  if (flags.profileRounds !== undefined && flags.profileRounds < 1)
    throw new RangeError('--profile-rounds must be at least 1.');
  if (flags.postgres !== undefined && !/^postgres(ql)?:\/\//.test(flags.postgres)) {
    throw new RangeError(`--postgres must be a postgres:// URL, got "${flags.postgres}".`);
  }
  const { dir, reason } = flags.dir ? { dir: flags.dir, reason: 'chosen with --dir' } : sameDeviceDir();
  return {
    preset,
    json: flags.json ?? false,
    rounds,
    warmUpRounds,
    windowMs,
    sliceMs,
    pairMs,
    samples,
    pickupSamples: Math.max(10, Math.round((base.pickupSamples * samples) / base.samples)),
    backlog,
    workers,
    e2eProcesses,
    e2eConcurrency,
    prefetch,
    references: flags.references ?? base.references,
    peers: flags.peers ?? false,
    columns: flags.columns === undefined ? null : flags.columns.split(',').map((id) => id.trim()),
    baseDir: dir,
    baseDirReason: reason,
    keep: flags.keep ?? false,
    postgres: flags.postgres,
    profile: !(flags.profile ?? (flags.profileOnly || base.profileByDefault))
      ? null
      : {
          ...base.profile,
          rounds: flags.profileRounds ?? base.profile.rounds,
          windowMs: flags.windowMs ?? base.profile.windowMs,
          sliceMs,
          backlogSizes: [...base.profile.backlogSizes],
          backlog,
        },
    profileOnly: flags.profileOnly ?? false,
  };
}

/** The system temp folder when it sits on the repository's device, else `.bench/` in the repository. */
function sameDeviceDir(): { dir: string; reason: string } {
  const tmp = tmpdir();
  if (statSync(tmp).dev === statSync(REPO_ROOT).dev)
    return { dir: tmp, reason: 'temp folder, same device as the repository' };
  return { dir: join(REPO_ROOT, '.bench'), reason: 'temp folder is on another device than the repository' };
}
