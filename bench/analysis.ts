// From rounds to results: a median/min/max per column, ratios taken within each round and then
// summarised, and the goals checked against those ratios.
import type { Throughput } from './measure.js';
import type { RunRecord } from './run.js';
import { ratios, summarize, type Summary } from './stats.js';

export interface ColumnResult {
  id: string;
  label: string;
  unit: 'tx/s' | 'jobs/s';
  perSec: Summary | null;
  txPerJob: Summary | null;
  statementsPerJob: Summary | null;
  ratio: { to: string; toLabel: string; summary: Summary | null } | null;
  errors: number;
  firstError?: string;
  drainedRounds: number;
}

export interface LatencyResult {
  gatewayP50Ms: Summary | null;
  gatewayP99Ms: Summary | null;
  bareGatewayP50Ms: Summary | null;
  bareGatewayP99Ms: Summary | null;
  directP50Ms: Summary | null;
  directP99Ms: Summary | null;
  verifyP50Ms: Summary | null;
  verifyP99Ms: Summary | null;
  floorP50Ms: Summary | null;
  floorP99Ms: Summary | null;
  /** Gateway p50 minus direct p50, per round. */
  overheadP50Ms: Summary | null;
  ratioP50: Summary | null;
  ratioP99: Summary | null;
  /** The bare gateway's p50 over the direct call's, per round. */
  bareRatioP50: Summary | null;
  errors: number;
  firstError?: string;
}

export interface Goal {
  name: string;
  measured: number | null;
  comparison: '>=' | '<=' | '<';
  target: number;
  pass: boolean;
}

export interface Derived {
  name: string;
  unit: string;
  summary: Summary | null;
}

export interface Analysis {
  columns: ColumnResult[];
  /** Per-round figures computed from the columns, to read the ratios by. */
  derived: Derived[];
  latency: LatencyResult;
  memory: { name: string; peakMiB: number | null; service: boolean }[];
  goals: Goal[];
}

/** Each column's ratio basis: what it is compared with, round by round. */
const RATIO_BASIS: Record<string, string> = {
  limitKnex: 'limit',
  library1: 'limit',
  libraryN: 'limit',
  libraryNp: 'limit',
  http1: 'library1',
  httpN: 'libraryN',
  http1Logged: 'http1',
  bareHttp1: 'library1',
  bareHttpN: 'libraryN',
  e2e: 'limit',
  e2eWorker: 'limit',
  pgLibrary1: 'pgLimit',
  pgLibraryN: 'pgLimit',
  pgE2e: 'pgLimit',
};

export const SERVICE_MEMORY_LIMIT_MIB = 150;
const SERVICES = new Set(['queue', 'receiver', 'gateway']);

export function analyse(run: RunRecord): Analysis {
  const series: Record<string, Throughput[]> = {};
  for (const { id } of run.columns) series[id] = run.rounds.map((r) => r.columns[id]!);
  const labels: Record<string, string> = Object.fromEntries(run.columns.map((c) => [c.id, c.label]));
  const columns = Object.entries(series).map(([id, values]): ColumnResult => {
    const basis = RATIO_BASIS[id];
    const rates = values.map((t) => t.perSec);
    const firstError = values.find((t) => t.firstError)?.firstError;
    return {
      id,
      label: labels[id]!,
      unit: /^(limit|pgLimit)/.test(id) ? 'tx/s' : 'jobs/s',
      perSec: summarize(rates),
      txPerJob: summarize(values.map((t) => t.txPerJob ?? Number.NaN)),
      statementsPerJob: summarize(values.map((t) => t.statementsPerJob ?? Number.NaN)),
      ratio:
        basis && series[basis]
          ? {
              to: basis,
              toLabel: labels[basis]!,
              summary: summarize(
                ratios(
                  rates,
                  series[basis]!.map((t) => t.perSec),
                ),
              ),
            }
          : null,
      errors: values.reduce((sum, t) => sum + t.errors, 0),
      ...(firstError ? { firstError } : {}),
      drainedRounds: values.filter((t) => t.drained).length,
    };
  });
  const latency = latencyResult(run);
  const memory = Object.entries(run.peaks).map(([name, peakMiB]) => ({ name, peakMiB, service: SERVICES.has(name) }));
  memory.push({ name: 'benchmark process', peakMiB: run.benchPeakRssMiB, service: false });
  return {
    columns,
    derived: derived(series, workersOf(columns)),
    latency,
    memory,
    goals: goals(columns, latency, memory),
  };
}

function derived(series: Record<string, Throughput[]>, loops: string): Derived[] {
  const msEach = (id: string) => (series[id] ?? []).map((t) => (t.perSec > 0 ? 1000 / t.perSec : Number.NaN));
  const limit = msEach('limit');
  const lib = msEach('library1');
  const http = msEach('http1');
  const bare = msEach('bareHttp1');
  const rate = (id: string) => (series[id] ?? []).map((t) => t.perSec);
  return [
    { name: 'one raw write transaction (the limit)', unit: 'ms', summary: summarize(limit) },
    { name: 'one library cycle, 1 worker (claim + finish)', unit: 'ms', summary: summarize(lib) },
    {
      name: 'library cycle in raw transactions (2.0 = the two-commit floor)',
      unit: 'x',
      summary: summarize(lib.map((v, i) => v / limit[i]!)),
    },
    {
      name: 'what HTTP adds per request, 1 worker ((HTTP cycle - library cycle) / 2)',
      unit: 'ms',
      summary: summarize(http.map((v, i) => (v - lib[i]!) / 2)),
    },
    {
      name: 'what bare node:http adds per request, 1 worker (same, reference front)',
      unit: 'ms',
      summary: summarize(bare.map((v, i) => (v - lib[i]!) / 2)),
    },
    {
      name: 'queue service / bare node:http front, 1 worker (throughput)',
      unit: 'x',
      summary: summarize(ratios(rate('http1'), rate('bareHttp1'))),
    },
    {
      name: `queue service / bare node:http front, ${loops} loops (throughput)`,
      unit: 'x',
      summary: summarize(ratios(rate('httpN'), rate('bareHttpN'))),
    },
  ];
}

function latencyResult(run: RunRecord): LatencyResult {
  const lat = run.rounds.map((r) => r.latency);
  const firstError = lat.find((l) => l.firstError)?.firstError;
  return {
    gatewayP50Ms: summarize(lat.map((l) => l.gatewayP50Ms)),
    gatewayP99Ms: summarize(lat.map((l) => l.gatewayP99Ms)),
    bareGatewayP50Ms: summarize(lat.map((l) => l.bareGatewayP50Ms)),
    bareGatewayP99Ms: summarize(lat.map((l) => l.bareGatewayP99Ms)),
    directP50Ms: summarize(lat.map((l) => l.directP50Ms)),
    directP99Ms: summarize(lat.map((l) => l.directP99Ms)),
    verifyP50Ms: summarize(lat.map((l) => l.verifyP50Ms)),
    verifyP99Ms: summarize(lat.map((l) => l.verifyP99Ms)),
    floorP50Ms: summarize(lat.map((l) => l.floorP50Ms)),
    floorP99Ms: summarize(lat.map((l) => l.floorP99Ms)),
    overheadP50Ms: summarize(lat.map((l) => l.gatewayP50Ms - l.directP50Ms)),
    ratioP50: summarize(
      ratios(
        lat.map((l) => l.gatewayP50Ms),
        lat.map((l) => l.directP50Ms),
      ),
    ),
    ratioP99: summarize(
      ratios(
        lat.map((l) => l.gatewayP99Ms),
        lat.map((l) => l.directP99Ms),
      ),
    ),
    bareRatioP50: summarize(
      ratios(
        lat.map((l) => l.bareGatewayP50Ms),
        lat.map((l) => l.directP50Ms),
      ),
    ),
    errors: lat.reduce((sum, l) => sum + l.errors, 0),
    ...(firstError ? { firstError } : {}),
  };
}

function workersOf(columns: ColumnResult[]): string {
  return /(\d+) loops/.exec(columns.find((c) => c.id === 'httpN')?.label ?? '')?.[1] ?? 'N';
}

function goals(columns: ColumnResult[], latency: LatencyResult, memory: Analysis['memory']): Goal[] {
  const ratioOf = (id: string) => columns.find((c) => c.id === id)?.ratio?.summary?.median ?? null;
  const check = (name: string, measured: number | null, comparison: Goal['comparison'], target: number): Goal => ({
    name,
    measured,
    comparison,
    target,
    pass:
      measured !== null &&
      (comparison === '>=' ? measured >= target : comparison === '<=' ? measured <= target : measured < target),
  });
  return [
    check('queue library cycle, 1 worker / raw limit', ratioOf('library1'), '>=', 0.4),
    check('HTTP cycle, 1 worker / library cycle, 1 worker', ratioOf('http1'), '>=', 0.85),
    check(`HTTP cycle / library cycle, ${workersOf(columns)} loops`, ratioOf('httpN'), '>=', 0.85),
    check('gateway send p50 / direct call p50', latency.ratioP50?.median ?? null, '<=', 1.5),
    ...memory
      .filter((m) => m.service)
      .map((m) => check(`peak resident memory of ${m.name} (MiB)`, m.peakMiB, '<', SERVICE_MEMORY_LIMIT_MIB)),
  ];
}
