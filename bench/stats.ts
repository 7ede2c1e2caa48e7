// Summaries of repeated measurements: median with min and max over rounds, and nearest-rank
// percentiles of latency samples. Medians, because a shared machine's noise comes in bursts.

export interface Summary {
  median: number;
  min: number;
  max: number;
  /** How many rounds gave a value. */
  n: number;
}

export function summarize(values: readonly number[]): Summary | null {
  const finite = values.filter((v) => Number.isFinite(v));
  if (finite.length === 0) return null;
  const sorted = [...finite].sort((a, b) => a - b);
  return { median: median(sorted), min: sorted[0]!, max: sorted[sorted.length - 1]!, n: sorted.length };
}

/** Median of values already sorted ascending. */
function median(sorted: readonly number[]): number {
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** Nearest-rank percentile (p in 0..100) of unsorted samples. */
export function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1]!;
}

/** Per-round ratio a/b for rounds where both were measured. */
export function ratios(a: readonly (number | undefined)[], b: readonly (number | undefined)[]): number[] {
  const out: number[] = [];
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    const x = a[i];
    const y = b[i];
    if (x !== undefined && y !== undefined && y > 0) out.push(x / y);
  }
  return out;
}
