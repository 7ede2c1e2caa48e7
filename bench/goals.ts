// The goals the benchmark checks, each a median over rounds (ratios taken within each round)
// against its target, PASS or MISS.
import type { Analysis, ColumnResult, LatencyResult, PickupResult } from './analysis.js';
import type { RunRecord } from './run.js';
import type { Summary } from './stats.js';

export interface Goal {
  name: string;
  /** Over rounds where the goal is per round; a single value (min = max) otherwise. */
  measured: Summary | null;
  unit: string;
  comparison: '>=' | '<=' | '<';
  target: number;
  /** Judged on the median. */
  pass: boolean;
}

export const SERVICE_MEMORY_LIMIT_MIB = 150;
/** graphile-worker's jobs/s at 8 concurrent workers on the PostgreSQL server the goal was set on. */
export const GRAPHILE_WORKER_JOBS_PER_SEC = 682;

function single(value: number | null): Summary | null {
  return value === null ? null : { median: value, min: value, max: value, n: 1 };
}

export function goals(
  run: RunRecord,
  columns: ColumnResult[],
  latency: LatencyResult,
  pickup: PickupResult[],
  memory: Analysis['memory'],
): Goal[] {
  const column = (id: string) => columns.find((c) => c.id === id);
  const ratioOf = (id: string) => column(id)?.ratio?.summary ?? null;
  const check = (
    name: string,
    measured: Summary | null,
    unit: string,
    comparison: Goal['comparison'],
    target: number,
  ): Goal => {
    const m = measured?.median;
    return {
      name,
      measured,
      unit,
      comparison,
      target,
      pass: m !== undefined && (comparison === '>=' ? m >= target : comparison === '<=' ? m <= target : m < target),
    };
  };
  const o = run.options;
  /** A goal on a column's ratio to the limit, where the run measured that column. */
  const ratioGoal = (id: string, name: string, target: number): Goal[] =>
    column(id) ? [check(name, ratioOf(id), 'x', '>=', target)] : [];
  const list = [
    ...ratioGoal('http1', 'HTTP claim+finish, 1 worker / limit', 0.45),
    ...ratioGoal('httpN', `HTTP claim+finish, ${o.workers} workers, rollback journal / limit`, 4),
    ...ratioGoal('httpNWal', `HTTP claim+finish, ${o.workers} workers, --journal wal / limit`, 8),
    ...ratioGoal('e2eWorker', `end to end, ${o.e2eProcesses} \`leasehold worker\` x ${o.e2eConcurrency} / limit`, 1.5),
    check(
      'pickup p50: enqueue answered -> lease at the waiting worker',
      pickup.find((p) => p.journal === 'delete')?.afterEnqueueP50Ms ?? null,
      'ms',
      '<=',
      5,
    ),
    check('gateway send p50 / direct receiver call p50', latency.ratioP50, 'x', '<=', 1.5),
  ];
  if (column('pgHttpN')) {
    list.push(
      check(
        `PostgreSQL: HTTP, ${o.workers} workers (graphile-worker's figure)`,
        column('pgHttpN')!.perSec,
        'jobs/s',
        '>=',
        GRAPHILE_WORKER_JOBS_PER_SEC,
      ),
    );
  }
  for (const m of memory.filter((m) => m.service)) {
    list.push(check(`peak resident memory of ${m.name}`, single(m.peakMiB), 'MiB', '<', SERVICE_MEMORY_LIMIT_MIB));
  }
  return list;
}
