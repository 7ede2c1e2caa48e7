// Worker loops for a timed window: `concurrency` async loops each run whole cycles until the
// window closes; a cycle that finds nothing to claim ends its loop early (the queue drained).

export interface LoopResult {
  /** Cycles that completed (jobs claimed and finished, or transactions committed). */
  jobs: number;
  /** From the window's start until the last loop stopped. */
  elapsedMs: number;
  drained: boolean;
  errors: number;
  firstError?: string;
}

/** One cycle; resolves false when there was nothing to do. */
export type Cycle = (loop: number) => Promise<boolean>;

/** Stop a loop that only fails, rather than spin for the whole window. */
const MAX_ERRORS_PER_LOOP = 20;

export async function runLoops(
  concurrency: number,
  windowMs: number,
  cycle: Cycle,
  startAt = Date.now(),
): Promise<LoopResult> {
  const wait = startAt - Date.now();
  if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  const endAt = startAt + windowMs;
  const started = performance.now() - Math.max(0, Date.now() - startAt);
  const result: LoopResult = { jobs: 0, elapsedMs: 0, drained: false, errors: 0 };
  const loop = async (index: number) => {
    let errors = 0;
    while (Date.now() < endAt) {
      try {
        if (!(await cycle(index))) {
          result.drained = true;
          return;
        }
        result.jobs++;
      } catch (err) {
        result.errors++;
        result.firstError ??= err instanceof Error ? err.message : String(err);
        if (++errors >= MAX_ERRORS_PER_LOOP) return;
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, (_, i) => loop(i)));
  result.elapsedMs = performance.now() - started;
  return result;
}

export function perSecond(result: Pick<LoopResult, 'jobs' | 'elapsedMs'>): number {
  return result.elapsedMs > 0 ? (result.jobs * 1000) / result.elapsedMs : 0;
}
