// The demo's options: defaults in one object, one function that checks ranges; the run takes
// only the resolved shape.
import type { TimelineEntry } from './timeline.js';

export const DEMO_DEFAULTS = {
  jobs: 12,
  workers: 3,
  leaseMs: 1_500,
  workMs: 300,
  seed: 42,
  timeoutMs: 90_000,
} as const;

export interface DemoOptions {
  /** `dist/cli/leasehold.js`: every process is `node <cliPath> <command>`. */
  cliPath: string;
  jobs?: number;
  workers?: number;
  leaseMs?: number;
  /** Simulated work per job before its send. */
  workMs?: number;
  seed?: number;
  /** Keep the temp dir (SQLite files, logs, events) even when the run passes. */
  keep?: boolean;
  /** Each timeline entry, as it happens. */
  onEntry?: (entry: TimelineEntry) => void;
  /** Abort (Ctrl-C) to stop early; every process is still stopped. */
  signal?: AbortSignal;
  timeoutMs?: number;
}

export type ResolvedDemoOptions = Required<Omit<DemoOptions, 'onEntry' | 'signal'>> &
  Pick<DemoOptions, 'onEntry' | 'signal'>;

export function resolveDemoOptions(options: DemoOptions): ResolvedDemoOptions {
  const int = (what: string, value: number, min: number, max: number) => {
    if (!Number.isSafeInteger(value) || value < min || value > max) {
      throw new RangeError(`${what} must be an integer from ${min} to ${max}, not ${String(value)}.`);
    }
    return value;
  };
  return {
    cliPath: options.cliPath,
    // Half the jobs are enqueued after the first freeze: both halves need work for three workers.
    jobs: int('jobs', options.jobs ?? DEMO_DEFAULTS.jobs, 6, 1_000),
    // One to freeze, one to kill, at least one to carry on.
    workers: int('workers', options.workers ?? DEMO_DEFAULTS.workers, 3, 20),
    leaseMs: int('leaseMs', options.leaseMs ?? DEMO_DEFAULTS.leaseMs, 600, 60_000),
    workMs: int('workMs', options.workMs ?? DEMO_DEFAULTS.workMs, 0, 60_000),
    seed: int('seed', options.seed ?? DEMO_DEFAULTS.seed, 0, 2 ** 32 - 1),
    keep: options.keep ?? false,
    timeoutMs: int('timeoutMs', options.timeoutMs ?? DEMO_DEFAULTS.timeoutMs, 1_000, 3_600_000),
    onEntry: options.onEntry,
    signal: options.signal,
  };
}
