// What `--peers` adds to the report: per comparison, leasehold's column and each peer's jobs/s and
// CPU per job (summed over every process serving it), and leasehold ÷ peer taken within each
// round, then summarised — with the goal set for it, where there is one.
import type { Analysis, ColumnResult } from '../analysis.js';
import { table } from '../report.js';
import type { RunRecord } from '../run.js';
import { ratios, summarize, type Summary } from '../stats.js';
import { peerComparisons } from './columns.js';

export interface PeerRow {
  id: string;
  label: string;
  perSec: Summary | null;
  cpuMsPerJob: Summary | null;
  cpuMsPerJobBy: Record<string, Summary | null>;
  /** leasehold ÷ this peer, per round; null on leasehold's own row. */
  ratio: Summary | null;
  goal: number | null;
  pass: boolean | null;
}

export interface PeerResult {
  column: string;
  rows: PeerRow[];
}

export function peerResults(run: RunRecord, analysis: Analysis): PeerResult[] {
  const column = (id: string): ColumnResult | undefined => analysis.columns.find((c) => c.id === id);
  const rates = (id: string) => run.rounds.map((r) => r.columns[id]?.perSec);
  const row = (c: ColumnResult, ratio: Summary | null, goal: number | null): PeerRow => ({
    id: c.id,
    label: c.label.replace(/^peers: /, ''),
    perSec: c.perSec,
    cpuMsPerJob: c.cpuMsPerJob,
    cpuMsPerJobBy: c.cpuMsPerJobBy,
    ratio,
    goal,
    pass: goal === null || ratio === null ? null : ratio.median >= goal,
  });
  const results: PeerResult[] = [];
  for (const comparison of peerComparisons(run.options.workers)) {
    const mine = column(comparison.leasehold);
    const peers = comparison.peers.filter((p) => column(p.id));
    if (!mine || peers.length === 0) continue;
    results.push({
      column: comparison.column,
      rows: [
        row(mine, null, null),
        ...peers.map((p) =>
          row(column(p.id)!, summarize(ratios(rates(comparison.leasehold), rates(p.id))), p.goal ?? null),
        ),
      ],
    });
  }
  return results;
}

function fmt(value: number | undefined | null, digits: number): string {
  return value === undefined || value === null || !Number.isFinite(value) ? '-' : value.toFixed(digits);
}

function range(s: Summary | null, digits: number): string {
  return s ? `${fmt(s.median, digits)} (${fmt(s.min, digits)}–${fmt(s.max, digits)})` : '-';
}

export function renderPeers(results: PeerResult[]): string {
  if (results.length === 0) return '';
  const rows = results.flatMap((r) => [
    [`${r.column}:`, '', '', '', ''],
    ...r.rows.map((row) => [
      `  ${row.label}`,
      range(row.perSec, 0),
      range(row.cpuMsPerJob, 2),
      row.ratio ? range(row.ratio, 2) : '',
      row.goal === null ? '' : `>= ${row.goal} x: ${row.pass ? 'PASS' : 'MISS'}`,
    ]),
  ]);
  const byProcess = results.flatMap((r) =>
    r.rows.map((row) => [
      row.label,
      Object.entries(row.cpuMsPerJobBy)
        .map(([kind, ms]) => `${kind} ${fmt(ms?.median, 2)}`)
        .join(', '),
    ]),
  );
  const unique = byProcess.filter((entry, i) => byProcess.findIndex((other) => other[0] === entry[0]) === i);
  return [
    'Peers (the same rounds, interleaved with the other columns; median (min–max) over rounds; leasehold ÷ peer taken',
    'within each round; CPU per job summed over every process serving the column, brokers and databases included):',
    table(['column / system', 'jobs/s', 'CPU ms/job', 'leasehold ÷ peer', 'goal'], rows),
    '',
    'Peers: CPU ms per job by process (median over rounds):',
    table(['system', 'CPU ms by process'], unique),
  ].join('\n');
}
