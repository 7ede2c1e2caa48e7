// A worker that runs on its own — BullMQ's, graphile-worker's, leasehold's worker library — measured
// in the benchmark's slices: between slices its jobs wait (parked, or the worker paused); a slice
// lets it go, counts the jobs it completes within the window, then stops it taking more and waits
// for those in hand, which count for the per-job figures (`jobsCounted`) but not the rate.
import { setTimeout as sleep } from 'node:timers/promises';
import type { ThroughputProbe } from '../library.js';
import { Sizing } from '../measure.js';
import { metered, type Meter } from '../meters.js';

export interface RunningWorker {
  /** Makes `pending` jobs wait, untimed; none is taken before `go`. */
  topUp(pending: number): Promise<void>;
  /** Lets the worker take jobs. */
  go(): Promise<void>;
  /** Stops it taking more, and waits for the jobs in hand to complete. */
  halt(): Promise<void>;
  /** Jobs completed so far. */
  readonly completed: number;
  /** Jobs that failed or were lost so far, and the first reason. */
  readonly failures: { count: number; first?: string };
  /** Every process serving the column: the worker's, the broker's, any downstream's. */
  meter: Meter;
  peaks(): Record<string, number | null>;
  close(): Promise<void>;
}

/**
 * The probe of a worker. `guess`: jobs per raw limit transaction to size the first slice by (as
 * `Sizing`). It is warmed up as every column is, by the run's warm-up rounds (run.ts).
 */
export function windowProbe(worker: RunningWorker, guess: number): ThroughputProbe {
  const sizing = new Sizing(guess);
  let pending = 0;
  return {
    prepare: async (ctx) => {
      pending = sizing.pending(ctx);
      await worker.topUp(pending);
    },
    slice: async (ms) => {
      const from = worker.completed;
      const failed = worker.failures.count;
      let counted = 0;
      const result = await metered(worker.meter, async () => {
        const started = performance.now();
        await worker.go();
        await sleep(Math.max(0, ms - (performance.now() - started)));
        const jobs = worker.completed - from;
        const elapsedMs = performance.now() - started;
        await worker.halt();
        counted = worker.completed - from;
        const errors = worker.failures.count - failed;
        return {
          jobs,
          elapsedMs,
          drained: counted >= pending,
          errors,
          ...(errors > 0 && worker.failures.first ? { firstError: worker.failures.first } : {}),
        };
      });
      const sliced = { ...result, jobsCounted: counted };
      sizing.observe(sliced);
      return sliced;
    },
    peaks: () => worker.peaks(),
    close: () => worker.close(),
  };
}

/** Counts completions and failures, and wakes whoever waits for the jobs in hand to reach none. */
export class Tally {
  completed = 0;
  readonly failures: { count: number; first?: string } = { count: 0 };
  private inHand = 0;
  private idle: Array<() => void> = [];

  started(): void {
    this.inHand += 1;
  }

  /** A job in hand completed, or with `error` failed. */
  ended(error?: unknown): void {
    if (error === undefined) this.completed += 1;
    else {
      this.failures.count += 1;
      this.failures.first ??= error instanceof Error ? error.message : String(error);
    }
    this.handedBack();
  }

  /** A job in hand went back to wait, neither completed nor failed (taken just as the worker stopped). */
  handedBack(): void {
    this.inHand = Math.max(0, this.inHand - 1);
    if (this.inHand === 0) for (const wake of this.idle.splice(0)) wake();
  }

  /** Resolves once no job is in hand, or after `limitMs` (a job that never ends is not waited for). */
  settled(limitMs = 5_000): Promise<void> {
    if (this.inHand === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, limitMs);
      this.idle.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }
}
