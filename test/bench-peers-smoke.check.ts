// One short round of `npm run bench -- --peers` (built): leasehold's worker and each peer run
// without errors, each reports jobs/s and CPU per job, and every comparison a leasehold ÷ peer
// ratio. Without redis-server the BullMQ columns are skipped with one note.
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
    label: string;
    perSec: Summary | null;
    cpuMsPerJob: Summary | null;
    errors: number;
    firstError?: string;
  }[];
  peers: { column: string; rows: { id: string; perSec: Summary | null; ratio: Summary | null }[] }[];
  notes: string[];
}

/** One short round of `--peers` on `columns`, with `extra` flags, as its JSON report. */
async function quickPeers(columns: string[], extra: string[] = []): Promise<Report> {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    [
      MAIN,
      '--quick',
      '--rounds',
      '1',
      '--window-ms',
      '200',
      '--samples',
      '10',
      '--peers',
      ...extra,
      '--columns',
      columns.join(','),
      '--json',
    ],
    { maxBuffer: 64 * 1024 * 1024 },
  );
  return JSON.parse(stdout) as Report;
}

test('a quick round of --peers measures leasehold beside BullMQ, the idempotency-key reference and graphile-worker', async () => {
  const columns = ['peerLh1', 'peerBull1', 'peerIdem', 'peerGraphile1'];
  const report = await quickPeers(columns);
  const noRedis = report.notes.some((note) => note.includes('no redis-server'));
  const expected = noRedis ? ['peerLh1', 'peerGraphile1'] : columns;
  expect(report.columns.map((c) => c.id).filter((id) => id.startsWith('peer'))).toEqual(expected);
  for (const column of report.columns.filter((c) => c.id.startsWith('peer'))) {
    expect({ id: column.id, errors: column.errors, firstError: column.firstError }).toEqual({
      id: column.id,
      errors: 0,
      firstError: undefined,
    });
    expect(column.perSec?.median, column.id).toBeGreaterThan(0);
    expect(column.cpuMsPerJob?.median, column.id).toBeGreaterThan(0);
  }
  const oneWorker = report.peers.find((p) => p.column === '1 worker')!;
  expect(oneWorker.rows.map((r) => r.id)).toEqual(
    noRedis ? ['peerLh1', 'peerGraphile1'] : ['peerLh1', 'peerBull1', 'peerGraphile1'],
  );
  for (const row of oneWorker.rows.slice(1)) expect(row.ratio?.median, row.id).toBeGreaterThan(0);
});

test('--prefetch runs leasehold worker library and `leasehold worker` with it, and says so in their labels', async () => {
  const columns = ['peerLh1', 'peerLhE2e'];
  const report = await quickPeers(columns, ['--prefetch', '4']);
  const ran = report.columns.filter((c) => columns.includes(c.id));
  expect(ran.map((c) => c.id)).toEqual(columns);
  for (const column of ran) {
    expect({ id: column.id, errors: column.errors, firstError: column.firstError }).toEqual({
      id: column.id,
      errors: 0,
      firstError: undefined,
    });
    expect(column.perSec?.median, column.id).toBeGreaterThan(0);
    expect(column.label, column.id).toMatch(/prefetch 4/);
  }
});
