// Reads a Prometheus text exposition (GET /metrics) into numbers a test can compare.

export interface Scrape {
  /** The value of `name` with exactly these labels (the `service` label aside); 0 when absent. */
  value(name: string, labels?: Record<string, string>): number;
  /** Every series of `name`, labels and value. */
  series(name: string): Array<{ labels: Record<string, string>; value: number }>;
  text: string;
}

const LINE = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)$/;
const LABEL = /(\w+)="((?:[^"\\]|\\.)*)"/g;

export function parseMetrics(text: string): Scrape {
  const all: Array<{ name: string; labels: Record<string, string>; value: number }> = [];
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || line.trim() === '') continue;
    const match = LINE.exec(line);
    if (!match) throw new Error(`not a metrics line: ${line}`);
    const labels: Record<string, string> = {};
    for (const [, key, value] of (match[2] ?? '').matchAll(LABEL)) if (key !== 'service') labels[key!] = value!;
    all.push({ name: match[1]!, labels, value: Number(match[3]) });
  }
  const series = (name: string) => all.filter((s) => s.name === name).map(({ labels, value }) => ({ labels, value }));
  return {
    text,
    series,
    value(name, labels = {}) {
      const wanted = JSON.stringify(Object.entries(labels).sort());
      const found = series(name).find((s) => JSON.stringify(Object.entries(s.labels).sort()) === wanted);
      return found?.value ?? 0;
    },
  };
}
