// The demo's jobs: ids and quantities from a seeded generator, so a seed replays the same run.

export interface DemoJob {
  id: string;
  qty: number;
}

/** mulberry32: a small, fast, well-mixed 32-bit generator; returns floats in [0, 1). */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** `count` jobs named job-01, job-02... with a qty from 1 to 9 each. */
export function demoJobs(count: number, seed: number): DemoJob[] {
  const random = seededRandom(seed);
  const width = Math.max(2, String(count).length);
  return Array.from({ length: count }, (_, i) => ({
    id: `job-${String(i + 1).padStart(width, '0')}`,
    qty: 1 + Math.floor(random() * 9),
  }));
}
