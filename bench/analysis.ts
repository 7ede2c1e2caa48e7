// From rounds to results: a median/min/max per column, ratios to the limit taken within each
// round and then summarised, and the goals checked against those ratios.
import type { Throughput } from './measure.js';
import type { ByKind } from './meters.js';
import type { PickupSample } from './pickup.js';
import type { RunRecord } from './run.js';
import { goals, type Goal } from './goals.js';
import { ratios, summarize, type Summary } from './stats.js';

export interface ColumnResult {
  id: string;
  label: string;
  unit: 'tx/s' | 'jobs/s';
  perSec: Summary | null;
  txPerJob: Summary | null;
  statementsPerJob: Summary | null;
  requestsPerJob: Summary | null;
  cpuMsPerJob: Summary | null;
  /** CPU per job by kind of process. */
  cpuMsPerJobBy: Record<string, Summary | null>;
  /** Requests per job by the service that received them. */
  requestsPerJobBy: Record<string, Summary | null>;
  /** CPU cores the column's processes kept busy: CPU per job times jobs per second. */
  cores: Summary | null;
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

export interface PickupResult {
  journal: string;
  afterEnqueueP50Ms: Summary | null;
  afterEnqueueP99Ms: Summary | null;
  fromEnqueueStartP50Ms: Summary | null;
  fromEnqueueStartP99Ms: Summary | null;
  errors: number;
  firstError?: string;
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
  pickup: PickupResult[];
  memory: { name: string; peakMiB: number | null; service: boolean }[];
  goals: Goal[];
}

/** The limit each column is a ratio of, round by round: PostgreSQL's for its columns, else SQLite's. */
function basisOf(id: string): string | null {
  // The peer columns are read as ratios of each other (peers/report.ts).
  if (id === 'limit' || id === 'pgLimit' || id.startsWith('peer')) return null;
  return id.startsWith('pg') ? 'pgLimit' : 'limit';
}

const SERVICES = new Set(['queue', 'receiver', 'gateway']);

export function analyse(run: RunRecord): Analysis {
  const series: Record<string, Throughput[]> = {};
  for (const { id } of run.columns) series[id] = run.rounds.map((r) => r.columns[id]!);
  const labels: Record<string, string> = Object.fromEntries(run.columns.map((c) => [c.id, c.label]));
  const columns = Object.entries(series).map(([id, values]): ColumnResult => {
    const basis = basisOf(id);
    const rates = values.map((t) => t.perSec);
    const firstError = values.find((t) => t.firstError)?.firstError;
    const per = (pick: (t: Throughput) => number | null) => summarize(values.map((t) => pick(t) ?? Number.NaN));
    return {
      id,
      label: labels[id]!,
      unit: /^(limit|pgLimit)/.test(id) ? 'tx/s' : 'jobs/s',
      perSec: summarize(rates),
      txPerJob: per((t) => t.txPerJob),
      statementsPerJob: per((t) => t.statementsPerJob),
      requestsPerJob: per((t) => t.requestsPerJob),
      cpuMsPerJob: per((t) => t.cpuMsPerJob),
      cpuMsPerJobBy: byKind(values, (t) => t.cpuMsPerJobBy),
      requestsPerJobBy: byKind(values, (t) => t.requestsPerJobBy),
      cores: per((t) => (t.cpuMsPerJob === null ? null : (t.cpuMsPerJob * t.perSec) / 1000)),
      ratio:
        basis && series[basis]
          ? {
              to: basis,
              toLabel: labels[basis]!,
              // The limit measured beside this column's slices where there is one, else the round's.
              summary: summarize(
                ratios(
                  rates,
                  values.map((t, i) =>
                    basis === 'limit' && t.pairedLimitPerSec !== undefined
                      ? t.pairedLimitPerSec
                      : series[basis]![i]!.perSec,
                  ),
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
  const pickup = pickupResults(run);
  const memory = Object.entries(run.peaks).map(([name, peakMiB]) => ({ name, peakMiB, service: SERVICES.has(name) }));
  memory.push({ name: 'benchmark process', peakMiB: run.benchPeakRssMiB, service: false });
  return {
    columns,
    derived: derived(series, run),
    latency,
    pickup,
    memory,
    goals: goals(run, columns, latency, pickup, memory),
  };
}

/** A by-kind figure summarised over rounds, kind by kind. */
function byKind(values: Throughput[], pick: (t: Throughput) => ByKind): Record<string, Summary | null> {
  const kinds = [...new Set(values.flatMap((t) => Object.keys(pick(t))))];
  return Object.fromEntries(kinds.map((kind) => [kind, summarize(values.map((t) => pick(t)[kind] ?? Number.NaN))]));
}

function derived(series: Record<string, Throughput[]>, run: RunRecord): Derived[] {
  const msEach = (id: string) => (series[id] ?? []).map((t) => (t.perSec > 0 ? 1000 / t.perSec : Number.NaN));
  const rate = (id: string) => (series[id] ?? []).map((t) => t.perSec);
  const limit = msEach('limit');
  const lib = msEach('library1');
  const http = msEach('http1');
  const bare = msEach('bareHttp1');
  return [
    { name: 'one raw write transaction, rollback journal (the limit)', unit: 'ms', summary: summarize(limit) },
    { name: 'one raw write transaction, WAL', unit: 'ms', summary: summarize(msEach('limitWal')) },
    { name: 'one job in the library, 1 loop (finish + claim next)', unit: 'ms', summary: summarize(lib) },
    { name: 'one job over HTTP, 1 worker (one request)', unit: 'ms', summary: summarize(http) },
    {
      name: 'what HTTP adds per job, 1 worker (HTTP - library)',
      unit: 'ms',
      summary: summarize(http.map((v, i) => v - lib[i]!)),
    },
    {
      name: 'what bare node:http adds per job, 1 worker (reference front - library)',
      unit: 'ms',
      summary: summarize(bare.map((v, i) => v - lib[i]!)),
    },
    {
      name: 'queue service / bare node:http front, 1 worker (throughput)',
      unit: 'x',
      summary: summarize(ratios(rate('http1'), rate('bareHttp1'))),
    },
    {
      name: `queue service / bare node:http front, ${run.options.workers} workers (throughput)`,
      unit: 'x',
      summary: summarize(ratios(rate('httpN'), rate('bareHttpN'))),
    },
    {
      name: 'HTTP / library, same loops, rollback journal (throughput)',
      unit: 'x',
      summary: summarize(ratios(rate('httpN'), rate('libraryN'))),
    },
    {
      name: 'HTTP / library, same loops, WAL (throughput)',
      unit: 'x',
      summary: summarize(ratios(rate('httpNWal'), rate('libraryNWal'))),
    },
    ...['delete', 'wal'].map((journal) => ({
      name: `pickup p50, ${journal === 'wal' ? 'WAL' : 'rollback journal'}, in raw write transactions (rollback) of its round`,
      unit: 'x',
      summary: summarize(run.rounds.map((r, i) => (r.pickup[journal]?.afterEnqueueP50Ms ?? Number.NaN) / limit[i]!)),
    })),
    {
      name: '`leasehold worker` / minimal worker, end to end (throughput)',
      unit: 'x',
      summary: summarize(ratios(rate('e2eWorker'), rate('e2e'))),
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

function pickupResults(run: RunRecord): PickupResult[] {
  const journals = [...new Set(run.rounds.flatMap((r) => Object.keys(r.pickup)))];
  return journals.map((journal) => {
    const samples = run.rounds.map((r) => r.pickup[journal]).filter((s): s is PickupSample => s !== undefined);
    const firstError = samples.find((s) => s.firstError)?.firstError;
    return {
      journal,
      afterEnqueueP50Ms: summarize(samples.map((s) => s.afterEnqueueP50Ms)),
      afterEnqueueP99Ms: summarize(samples.map((s) => s.afterEnqueueP99Ms)),
      fromEnqueueStartP50Ms: summarize(samples.map((s) => s.fromEnqueueStartP50Ms)),
      fromEnqueueStartP99Ms: summarize(samples.map((s) => s.fromEnqueueStartP99Ms)),
      errors: samples.reduce((sum, s) => sum + s.errors, 0),
      ...(firstError ? { firstError } : {}),
    };
  });
}
