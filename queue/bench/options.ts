// Benchmark options: two presets (full and --quick), flags that override them, and where the
// databases go — a temporary folder on the same device as the repository, so the limit and
// the system are measured on the same disk.
import { statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface BenchFlags {
  quick?: boolean;
  json?: boolean;
  rounds?: number;
  windowMs?: number;
  samples?: number;
  backlog?: number;
  workers?: number;
  dir?: string;
  keep?: boolean;
  postgres?: string;
  profile?: boolean;
}

export interface BenchOptions {
  preset: 'quick' | 'full';
  json: boolean;
  rounds: number;
  windowMs: number;
  /** Latency samples of each kind per round. */
  samples: number;
  backlog: number;
  workers: number;
  /** Parent folder for this run's temporary folder. */
  baseDir: string;
  /** Why baseDir was chosen. */
  baseDirReason: string;
  keep: boolean;
  postgres: string | undefined;
  profile: boolean;
}

export const PRESETS = {
  full: { rounds: 12, windowMs: 1_500, samples: 150 },
  quick: { rounds: 5, windowMs: 500, samples: 60 },
} as const;

export const DEFAULT_BACKLOG = 1_000;
export const DEFAULT_WORKERS = 4;

export const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));

export function resolveOptions(flags: BenchFlags): BenchOptions {
  const preset = flags.quick ? 'quick' : 'full';
  const base = PRESETS[preset];
  const rounds = flags.rounds ?? base.rounds;
  const windowMs = flags.windowMs ?? base.windowMs;
  const samples = flags.samples ?? base.samples;
  const backlog = flags.backlog ?? DEFAULT_BACKLOG;
  const workers = flags.workers ?? DEFAULT_WORKERS;
  if (rounds < 1) throw new RangeError(`--rounds must be at least 1, got ${rounds}.`);
  if (windowMs < 100) throw new RangeError(`--window-ms must be at least 100, got ${windowMs}.`);
  if (samples < 10) throw new RangeError(`--samples must be at least 10 (a p99 needs them), got ${samples}.`);
  if (backlog < 0) throw new RangeError(`--backlog must be 0 or more, got ${backlog}.`);
  if (workers < 2) throw new RangeError(`--workers must be at least 2, got ${workers}.`);
  if (flags.postgres !== undefined && !/^postgres(ql)?:\/\//.test(flags.postgres)) {
    throw new RangeError(`--postgres must be a postgres:// URL, got "${flags.postgres}".`);
  }
  const { dir, reason } = flags.dir ? { dir: flags.dir, reason: 'chosen with --dir' } : sameDeviceDir();
  return {
    preset,
    json: flags.json ?? false,
    rounds,
    windowMs,
    samples,
    backlog,
    workers,
    baseDir: dir,
    baseDirReason: reason,
    keep: flags.keep ?? false,
    postgres: flags.postgres,
    profile: flags.profile ?? true,
  };
}

/** The system temp folder when it sits on the repository's device, else `.bench/` in the repository. */
function sameDeviceDir(): { dir: string; reason: string } {
  const tmp = tmpdir();
  if (statSync(tmp).dev === statSync(REPO_ROOT).dev) return { dir: tmp, reason: 'temp folder, same device as the repository' };
  return { dir: join(REPO_ROOT, '.bench'), reason: 'temp folder is on another device than the repository' };
}
