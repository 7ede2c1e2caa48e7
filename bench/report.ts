// The printed report: one table of throughput and ratios, the gateway latency, peak memory and
// the goals with PASS/MISS; and the same results as JSON for machines.
import type { Analysis, ColumnResult } from './analysis.js';
import type { RunRecord } from './run.js';
import type { Summary } from './stats.js';

function fmt(value: number | undefined | null, digits: number): string {
  return value === undefined || value === null || !Number.isFinite(value) ? '-' : value.toFixed(digits);
}

function range(s: Summary | null, digits: number): string {
  return s ? `${fmt(s.median, digits)} [${fmt(s.min, digits)}..${fmt(s.max, digits)}]` : '-';
}

/** Left-aligned first column, right-aligned numbers, one space of air. */
export function table(head: string[], rows: string[][]): string {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(head), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

function columnRow(c: ColumnResult): string[] {
  const digits = c.perSec && c.perSec.median < 100 ? 1 : 0;
  const note = [c.errors ? `${c.errors} errors` : '', c.drainedRounds ? `drained in ${c.drainedRounds} rounds` : '']
    .filter(Boolean)
    .join(', ');
  return [
    c.label + (note ? ` (${note})` : ''),
    fmt(c.perSec?.median, digits),
    fmt(c.perSec?.min, digits),
    fmt(c.perSec?.max, digits),
    c.unit,
    fmt(c.txPerJob?.median, 2),
    fmt(c.statementsPerJob?.median, 1),
    c.ratio ? range(c.ratio.summary, 2) : '',
    c.ratio ? `of ${c.ratio.to}` : '',
  ];
}

export function renderText(run: RunRecord, analysis: Analysis): string {
  const o = run.options;
  const env = run.environment;
  const lat = analysis.latency;
  const out: string[] = [];
  out.push(
    `leasehold benchmark (${o.preset}): ${o.rounds} rounds; per round each column runs ${o.windowMs} ms in slices of ${o.sliceMs} ms, columns taking turns`,
    `each slice starts with ${o.backlog} pending jobs plus what it can consume (topped up, untimed); ${o.workers} workers in the concurrent columns; services are child processes`,
    `databases in ${run.dir} (${o.baseDirReason}); rollback journal, synchronous=FULL, BEGIN IMMEDIATE`,
    `node ${env.node}, SQLite ${env.sqlite}, ${env.cpus} x ${env.cpuModel}; took ${(run.durationMs / 1000).toFixed(1)} s`,
    '',
    'Throughput (median [min..max] over rounds; ratios taken within each round, then summarised):',
    table(
      ['column', 'median', 'min', 'max', 'unit', 'tx/job', 'stmt/job', 'ratio median [min..max]', 'basis'],
      analysis.columns.map(columnRow),
    ),
    '',
    table(
      ['read as time per step (median [min..max] over rounds)', 'value', 'unit'],
      analysis.derived.map((d) => [d.name, range(d.summary, 2), d.unit]),
    ),
    '',
    `Gateway overhead (${o.samples} requests of each kind per round, one at a time, kinds taking turns):`,
    table(
      ['latency, ms', 'p50', 'p99'],
      [
        ['POST /send through the gateway', range(lat.gatewayP50Ms, 2), range(lat.gatewayP99Ms, 2)],
        ['POST /effects straight to the receiver', range(lat.directP50Ms, 2), range(lat.directP99Ms, 2)],
        ['ratio gateway / direct', range(lat.ratioP50, 2), range(lat.ratioP99, 2)],
        ['gateway minus direct', range(lat.overheadP50Ms, 2), ''],
        [
          'reference: the same verify and forward behind bare node:http',
          range(lat.bareGatewayP50Ms, 2),
          range(lat.bareGatewayP99Ms, 2),
        ],
        ['ratio bare gateway / direct', range(lat.bareRatioP50, 2), ''],
        [
          "the gateway's lease check alone: POST /jobs/:id/verify",
          range(lat.verifyP50Ms, 2),
          range(lat.verifyP99Ms, 2),
        ],
        ['floor: a bare node:http server, same client', range(lat.floorP50Ms, 2), range(lat.floorP99Ms, 2)],
      ],
    ),
  );
  if (lat.errors) out.push(`  ${lat.errors} sends failed; first: ${lat.firstError}`);
  out.push(
    '',
    'Peak resident memory (VmHWM) over the whole run:',
    table(
      ['process', 'MiB'],
      analysis.memory.map((m) => [m.name + (m.service ? ' (service)' : ''), fmt(m.peakMiB, 1)]),
    ),
    '',
    'Goals:',
    table(
      ['goal', 'measured', 'target', 'result'],
      analysis.goals.map((g) => [g.name, fmt(g.measured, 2), `${g.comparison} ${g.target}`, g.pass ? 'PASS' : 'MISS']),
    ),
  );
  const failed = analysis.columns.filter((c) => c.firstError);
  for (const c of failed) out.push(`note: ${c.label}: first error: ${c.firstError}`);
  return out.join('\n');
}

export function renderJson(run: RunRecord | null, analysis: Analysis | null, extra: Record<string, unknown>): string {
  return JSON.stringify(
    {
      options: run?.options ?? null,
      environment: run?.environment ?? null,
      dir: run?.dir ?? null,
      startedAt: run?.startedAt ?? null,
      durationMs: run?.durationMs ?? null,
      columns: analysis?.columns ?? null,
      derived: analysis?.derived ?? null,
      latency: analysis?.latency ?? null,
      memory: analysis?.memory ?? null,
      goals: analysis?.goals ?? null,
      ...extra,
      rounds: run?.rounds ?? null,
    },
    null,
    2,
  );
}
