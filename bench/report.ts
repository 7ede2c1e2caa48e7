// The printed report: one table of throughput and ratios, the gateway and pickup latencies, peak
// memory and the goals with PASS/MISS; and the same results as JSON for machines.
import type { Analysis, ColumnResult } from './analysis.js';
import type { Goal } from './goals.js';
import type { RunRecord } from './run.js';
import type { Summary } from './stats.js';
import { peerResults, renderPeers } from './peers/report.js';

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
    fmt(c.requestsPerJob?.median, 2),
    fmt(c.cpuMsPerJob?.median, 2),
    fmt(c.cores?.median, 2),
    c.ratio ? range(c.ratio.summary, 2) : '',
    c.ratio ? `x ${c.ratio.to}` : '',
  ];
}

export function renderText(run: RunRecord, analysis: Analysis): string {
  const o = run.options;
  const env = run.environment;
  const lat = analysis.latency;
  const out: string[] = [];
  out.push(
    `leasehold benchmark (${o.preset}): ${o.rounds} rounds after ${o.warmUpRounds} not counted; per round each column runs ${o.windowMs} ms in slices of ${o.sliceMs} ms, columns taking turns;`,
    o.pairMs > 0
      ? `the limit runs ${o.pairMs} ms just before each slice of every SQLite column, and each ratio divides by the limit so paired`
      : 'each ratio divides by the limit of the whole round',
    `each slice starts with ${o.backlog} pending jobs plus what it can consume (topped up, untimed); ${o.workers} loops in the concurrent library and HTTP columns,`,
    `${o.e2eProcesses} worker processes x ${o.e2eConcurrency} end to end; services are child processes started with the CLI; synchronous=FULL throughout`,
    `databases in ${run.dir} (${o.baseDirReason})`,
    `node ${env.node}, SQLite ${env.sqlite}, ${env.cpus} x ${env.cpuModel}; took ${(run.durationMs / 1000).toFixed(1)} s`,
    '',
    'Throughput (median [min..max] over rounds; ratios taken within each round, then summarised; tx, statements,',
    'requests and CPU per job counted in every process serving the column; cores: CPU per job x jobs/s):',
    table(
      [
        'column',
        'median',
        'min',
        'max',
        'unit',
        'tx/job',
        'stmt/job',
        'req/job',
        'cpu ms/job',
        'cores',
        'ratio median [min..max]',
        'of',
      ],
      analysis.columns.map(columnRow),
    ),
    '',
    'Per job by process (median over rounds): CPU ms, and the HTTP requests each service received:',
    table(
      ['column', 'CPU ms by process', 'requests by service'],
      analysis.columns
        .filter((c) => Object.keys(c.cpuMsPerJobBy).length > 1)
        .map((c) => [
          c.label,
          Object.entries(c.cpuMsPerJobBy)
            .map(([kind, ms]) => `${kind} ${fmt(ms?.median, 2)}`)
            .join(', '),
          Object.entries(c.requestsPerJobBy)
            .map(([kind, n]) => `${kind} ${fmt(n?.median, 2)}`)
            .join(', '),
        ]),
    ),
    '',
    table(
      ['read as time per step (median [min..max] over rounds)', 'value', 'unit'],
      analysis.derived.filter((d) => d.summary).map((d) => [d.name, range(d.summary, 2), d.unit]),
    ),
    '',
    `Pickup (${o.pickupSamples} jobs per round and journal, each enqueued while a worker waits in POST /claims with waitMs):`,
    table(
      ['latency, ms', 'p50', 'p99'],
      analysis.pickup.flatMap((p) => [
        [
          `${p.journal === 'wal' ? '--journal wal' : 'rollback journal'}: enqueue answered -> lease received`,
          range(p.afterEnqueueP50Ms, 2),
          range(p.afterEnqueueP99Ms, 2),
        ],
        [
          `${p.journal === 'wal' ? '--journal wal' : 'rollback journal'}: enqueue sent -> lease received`,
          range(p.fromEnqueueStartP50Ms, 2),
          range(p.fromEnqueueStartP99Ms, 2),
        ],
      ]),
    ),
  );
  for (const p of analysis.pickup)
    if (p.errors) out.push(`  ${p.journal}: ${p.errors} pickups failed; first: ${p.firstError}`);
  out.push(
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
    ...(o.peers ? [renderPeers(peerResults(run, analysis)), ''] : []),
    'Peak resident memory (VmHWM) over the whole run, the largest of each kind:',
    table(
      ['process', 'MiB'],
      analysis.memory.map((m) => [m.name + (m.service ? ' (service)' : ''), fmt(m.peakMiB, 1)]),
    ),
    '',
    'Goals (median [min..max] over rounds; judged on the median):',
    table(['goal', 'measured', 'goal', 'result'], analysis.goals.map(goalRow)),
  );
  for (const note of run.notes) out.push(`note: ${note}`);
  const failed = analysis.columns.filter((c) => c.firstError);
  for (const c of failed) out.push(`note: ${c.label}: ${c.errors} errors; first: ${c.firstError}`);
  return out.join('\n');
}

function goalRow(g: Goal): string[] {
  const digits = g.unit === 'x' ? 2 : g.unit === 'ms' ? 2 : 0;
  const measured = g.measured && g.measured.n > 1 ? range(g.measured, digits) : fmt(g.measured?.median ?? null, digits);
  return [g.name, `${measured} ${g.unit}`, `${g.comparison} ${g.target} ${g.unit}`, g.pass ? 'PASS' : 'MISS'];
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
      pickup: analysis?.pickup ?? null,
      notes: run?.notes ?? null,
      memory: analysis?.memory ?? null,
      goals: analysis?.goals ?? null,
      ...(run?.options.peers && analysis ? { peers: peerResults(run, analysis) } : {}),
      ...extra,
      rounds: run?.rounds ?? null,
    },
    null,
    2,
  );
}
