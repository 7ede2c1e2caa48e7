// One short round of `npm run bench` (built): every column runs without errors and reports
// its jobs/s, transactions, statements and requests per job, and every goal gets a verdict.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect, test } from 'vitest';

const MAIN = fileURLToPath(new URL('../dist/bench/main.js', import.meta.url));

interface Summary {
  median: number;
}

interface Report {
  columns: {
    id: string;
    perSec: Summary | null;
    txPerJob: Summary | null;
    statementsPerJob: Summary | null;
    requestsPerJob: Summary | null;
    errors: number;
    firstError?: string;
  }[];
  pickup: { journal: string; afterEnqueueP50Ms: Summary | null; errors: number }[];
  goals: { name: string; measured: Summary | null; pass: boolean }[];
}

test('a quick round measures every column and checks every goal', async () => {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    [MAIN, '--quick', '--rounds', '1', '--window-ms', '200', '--samples', '10', '--json'],
    { maxBuffer: 64 * 1024 * 1024 },
  );
  const report = JSON.parse(stdout) as Report;
  const ids = report.columns.map((c) => c.id);
  expect(ids).toEqual(
    expect.arrayContaining(['limit', 'limitWal', 'library1', 'http1', 'httpN', 'httpNWal', 'e2eWorker']),
  );
  for (const column of report.columns) {
    expect({ id: column.id, errors: column.errors, firstError: column.firstError }).toEqual({
      id: column.id,
      errors: 0,
      firstError: undefined,
    });
    expect(column.perSec?.median, column.id).toBeGreaterThan(0);
    expect(column.txPerJob?.median, column.id).toBeGreaterThan(0);
    expect(column.statementsPerJob?.median, column.id).toBeGreaterThan(0);
    expect(column.requestsPerJob, column.id).not.toBeNull();
  }
  const http1 = report.columns.find((c) => c.id === 'http1')!;
  // One request per job: the finish brings the next lease back.
  expect(http1.requestsPerJob!.median).toBeGreaterThanOrEqual(1);
  expect(http1.requestsPerJob!.median).toBeLessThan(1.2);
  expect(report.pickup.map((p) => p.journal).sort()).toEqual(['delete', 'wal']);
  for (const pickup of report.pickup) {
    expect(pickup.errors).toBe(0);
    expect(pickup.afterEnqueueP50Ms).not.toBeNull();
  }
  for (const goal of report.goals) expect(goal.measured, goal.name).not.toBeNull();
});

test('--waves times each route of a wave, in both journals, from the services’ own metrics', async () => {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    [MAIN, '--waves', '--rounds', '2', '--window-ms', '500', '--json'],
    { maxBuffer: 16 * 1024 * 1024 },
  );
  const { waves } = JSON.parse(stdout) as {
    waves: {
      journal: string;
      windows: { jobsPerSec: number; routes: Record<string, { perSec: number; meanMs: number | null }> }[];
    }[];
  };
  expect(waves.map((w) => w.journal)).toEqual(['delete', 'wal']);
  for (const { journal, windows } of waves) {
    expect(windows, journal).toHaveLength(2);
    for (const window of windows) {
      expect(window.jobsPerSec, journal).toBeGreaterThan(0);
      const routes = Object.values(window.routes);
      expect(routes, journal).toHaveLength(6);
      for (const route of routes) {
        expect(route.perSec, journal).toBeGreaterThan(0);
        expect(route.meanMs, journal).toBeGreaterThan(0);
      }
    }
  }
});
