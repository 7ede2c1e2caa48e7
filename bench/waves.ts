// Where an end-to-end wave's time goes. The system of the end-to-end columns (queue, receiver and
// gateway as child processes, on their own SQLite files) with one `leasehold worker
// --concurrency n` that runs without pause; over each window, every service's own time per
// request by route, read from its `GET /metrics` (leasehold_http_request_duration_seconds: from
// the request to the end of its answer), beside the wave's period and the CPU each process used.
// A worker's jobs go in waves: its handlers' sends leave together in one `POST /sends`, whose
// answer starts the next wave's handlers on leases held ahead, while the finishes go to the queue
// beside them. So a wave lasts about as long as one `POST /sends`, and that request's time splits
// into the gateway's lease check at the queue, its forward to the receiver and the rest.
import type { ChildProcess } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import type { SqliteJournal } from '../platform/sqlite.js';
import { QueueClient } from '../queue/client.js';
import type { ProcessCounts } from './counting.js';
import { cpuTotal, deltaByKind, procStat } from './meters.js';
import { stopChild, type ChildService } from './processes.js';
import { table } from './report.js';
import { System } from './services.js';
import { spawnWorker } from './worker-cli.js';

export interface WavesOptions {
  dir: string;
  journals: readonly SqliteJournal[];
  concurrency: number;
  rounds: number;
  windowMs: number;
  /** How long the worker runs before the first window: its prefetch settles, V8 optimizes. */
  warmUpMs: number;
  progress: (line: string) => void;
}

/** Every service's own time per request: the route's series, from the request to the end of its answer. */
const REQUEST_SECONDS = 'leasehold_http_request_duration_seconds';
/** The gateway's wait for its own requests, from sending one to reading its answer. */
const UPSTREAM_SECONDS = 'leasehold_gateway_upstream_request_duration_seconds';

/**
 * The requests of a wave, each timed where its /metrics series says: by the service that
 * answered it, and for the gateway's own requests also by the gateway that waited for it.
 */
const ROUTES = [
  { service: 'gateway', series: REQUEST_SECONDS, labels: { route: '/sends' }, label: 'gateway POST /sends' },
  {
    service: 'gateway',
    series: UPSTREAM_SECONDS,
    labels: { call: 'lease_check' },
    label: 'its lease check, as the gateway waited for it',
  },
  {
    service: 'queue',
    series: REQUEST_SECONDS,
    labels: { route: '/verifications' },
    label: '  of which the queue: POST /verifications',
  },
  {
    service: 'gateway',
    series: UPSTREAM_SECONDS,
    labels: { call: 'forward' },
    label: 'its forward, as the gateway waited for it',
  },
  {
    service: 'receiver',
    series: REQUEST_SECONDS,
    labels: { route: '/effects' },
    label: '  of which the receiver: POST /effects?batch',
  },
  {
    service: 'queue',
    series: REQUEST_SECONDS,
    labels: { route: '/finishes' },
    label: 'beside it: queue POST /finishes',
  },
] as const;

type ServiceName = (typeof ROUTES)[number]['service'];

/** One window: jobs done, and by route the requests answered and their summed time. */
interface WindowFigures {
  jobsPerSec: number;
  /** By `ROUTES` label: requests per second and mean ms per request (null: none answered). */
  routes: Record<string, { perSec: number; meanMs: number | null }>;
  /**
   * The queue's and the receiver's mean write transaction: ms from BEGIN sent to COMMIT
   * answered, and every statement the service sent (its reads too) per transaction; null: none.
   */
  transactions: Record<string, { ms: number; statements: number } | null>;
  /** CPU ms per job by process. */
  cpuMsPerJob: Record<string, number>;
  /** Cores busy on average: every process's CPU over the window's wall time. */
  cores: number;
}

export interface WavesFigures {
  journal: SqliteJournal;
  concurrency: number;
  windows: WindowFigures[];
  /** Jobs pending at the end of the last window (0: the queue ran dry, the last window is short of work). */
  pendingAtEnd: number;
}

/** Enough jobs for the warm-up and every window at a few thousand jobs per second. */
const JOBS_PER_SECOND_ROOM = 4_000;

export async function runWaves(options: WavesOptions): Promise<WavesFigures[]> {
  const figures: WavesFigures[] = [];
  for (const journal of options.journals) figures.push(await runJournal(options, journal));
  return figures;
}

async function runJournal(options: WavesOptions, journal: SqliteJournal): Promise<WavesFigures> {
  const { dir, concurrency, rounds, windowMs, warmUpMs, progress } = options;
  const label = `waves-${journal}`;
  const system = await System.start(dir, label, undefined, journal);
  let worker: ChildProcess | undefined;
  const client = new QueueClient(system.queue.url);
  try {
    const jobs = Math.ceil(((warmUpMs + rounds * windowMs) / 1000) * JOBS_PER_SECOND_ROOM);
    progress(`waves, ${journal}: enqueueing ${jobs} jobs`);
    await system.queueDb.topUp(jobs, label);
    worker = spawnWorker(
      system,
      `${label}-worker`,
      ['--concurrency', String(concurrency), '--log-level', 'silent'],
      'ignore',
    );
    const services: Record<ServiceName, ChildService> = {
      queue: system.queue,
      gateway: system.gateway,
      receiver: system.receiver,
    };
    const workerPid = worker.pid!;
    const names = Object.keys(services) as ServiceName[];
    const read = async () => {
      const counts = Object.fromEntries(
        await Promise.all(names.map(async (name) => [name, await services[name].counts()] as const)),
      ) as Record<ServiceName, ProcessCounts>;
      return {
        at: performance.now(),
        done: (await client.stats()).done,
        metrics: Object.fromEntries(
          await Promise.all(names.map(async (name) => [name, await metricsText(services[name].url)] as const)),
        ) as Record<ServiceName, string>,
        counts,
        cpuMs: {
          ...Object.fromEntries(names.map((name) => [name, counts[name].cpuMs])),
          'leasehold worker': (await procStat(workerPid)).cpuMs,
        } as Record<string, number>,
      };
    };
    progress(`waves, ${journal}: warming up for ${warmUpMs} ms`);
    await sleep(warmUpMs);
    const windows: WindowFigures[] = [];
    for (let round = 1; round <= rounds; round++) {
      const before = await read();
      await sleep(windowMs);
      const after = await read();
      const seconds = (after.at - before.at) / 1000;
      const jobs = after.done - before.done;
      if (jobs <= 0) throw new Error(`waves, ${journal}: no job was done in a window of ${windowMs} ms`);
      const routes: WindowFigures['routes'] = {};
      for (const { service, series, labels, label: name } of ROUTES) {
        const was = timeOf(before.metrics[service], series, labels);
        const is = timeOf(after.metrics[service], series, labels);
        const count = is.count - was.count;
        routes[name] = {
          perSec: count / seconds,
          meanMs: count > 0 ? ((is.sumSeconds - was.sumSeconds) * 1000) / count : null,
        };
      }
      const cpu = deltaByKind(before.cpuMs, after.cpuMs);
      const transactions = Object.fromEntries(
        (['queue', 'receiver'] as const).map((name) => {
          const count = after.counts[name].sqliteTransactions - before.counts[name].sqliteTransactions;
          const ms = after.counts[name].sqliteTransactionMs - before.counts[name].sqliteTransactionMs;
          const statements = after.counts[name].statements - before.counts[name].statements;
          return [name, count > 0 ? { ms: ms / count, statements: statements / count } : null];
        }),
      );
      windows.push({
        jobsPerSec: jobs / seconds,
        routes,
        transactions,
        cpuMsPerJob: Object.fromEntries(Object.entries(cpu).map(([name, ms]) => [name, (ms ?? NaN) / jobs])),
        cores: cpuTotal(cpu)! / 1000 / seconds,
      });
      progress(`waves, ${journal}: window ${round} of ${rounds}: ${(jobs / seconds).toFixed(0)} jobs/s`);
    }
    return { journal, concurrency, windows, pendingAtEnd: (await client.stats()).pending };
  } finally {
    client.close();
    if (worker) await stopChild(worker);
    await system.stop();
  }
}

async function metricsText(baseUrl: string): Promise<string> {
  const response = await fetch(`${baseUrl}/metrics`);
  if (!response.ok) throw new Error(`GET ${baseUrl}/metrics answered ${response.status}`);
  return response.text();
}

/** A histogram's requests and summed seconds so far, over its series that carry `labels` (any others too). */
function timeOf(
  text: string,
  series: string,
  labels: Readonly<Record<string, string>>,
): { count: number; sumSeconds: number } {
  const time = { count: 0, sumSeconds: 0 };
  const pattern = new RegExp(`^${series}_(sum|count)\\{([^}]*)\\} (\\S+)$`, 'gm');
  for (const [, kind, given, value] of text.matchAll(pattern)) {
    const matches = Object.entries(labels).every(([name, wanted]) => given!.includes(`${name}="${wanted}"`));
    if (!matches) continue;
    if (kind === 'count') time.count += Number(value);
    else time.sumSeconds += Number(value);
  }
  return time;
}

const median = (values: readonly number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

const spread = (values: readonly number[], digits: number): string =>
  `${median(values).toFixed(digits)} [${Math.min(...values).toFixed(digits)}..${Math.max(...values).toFixed(digits)}]`;

export function renderWaves(all: readonly WavesFigures[]): string {
  const parts: string[] = [];
  for (const { journal, concurrency, windows, pendingAtEnd } of all) {
    const sends = windows.map((w) => w.routes[ROUTES[0].label]!.perSec);
    const rows: string[][] = [
      [
        'jobs/s',
        spread(
          windows.map((w) => w.jobsPerSec),
          0,
        ),
      ],
      [
        'jobs per wave (per POST /sends)',
        spread(
          windows.map((w, i) => w.jobsPerSec / sends[i]!),
          1,
        ),
      ],
      [
        'a wave, ms (1000 / POST /sends per second)',
        spread(
          sends.map((perSec) => 1000 / perSec),
          2,
        ),
      ],
    ];
    for (const { label } of ROUTES) {
      const means = windows.map((w) => w.routes[label]!.meanMs).filter((ms): ms is number => ms !== null);
      rows.push([`  ${label}, ms per request`, means.length > 0 ? spread(means, 2) : 'none']);
    }
    for (const name of ['receiver', 'queue']) {
      const seen = windows.flatMap((w) => w.transactions[name] ?? []);
      rows.push([
        `${name}: a write transaction, BEGIN sent to COMMIT answered, ms`,
        seen.length > 0
          ? spread(
              seen.map((t) => t.ms),
              2,
            )
          : 'none',
      ]);
      rows.push([
        `${name}: statements per write transaction (its reads too)`,
        seen.length > 0
          ? spread(
              seen.map((t) => t.statements),
              1,
            )
          : 'none',
      ]);
    }
    for (const name of Object.keys(windows[0]!.cpuMsPerJob)) {
      rows.push([
        `CPU ms per job: ${name}`,
        spread(
          windows.map((w) => w.cpuMsPerJob[name]!),
          2,
        ),
      ]);
    }
    rows.push([
      'cores busy (all four processes)',
      spread(
        windows.map((w) => w.cores),
        2,
      ),
    ]);
    parts.push(
      [
        `Where a wave's time goes, ${journal === 'wal' ? '--journal wal' : 'rollback journal'}: one \`leasehold worker --concurrency ${concurrency}\`, ${windows.length} windows (median [min..max]):`,
        table(['figure', 'value'], rows),
        ...(pendingAtEnd === 0 ? ['the queue ran dry before the last window ended: it is short of work'] : []),
      ].join('\n'),
    );
  }
  parts.push(
    [
      "Each request's time is its service's own, from the request to the end of its answer, read from its",
      'GET /metrics. The gateway makes the lease check and the forward inside its POST /sends, one after the',
      'other, and its /metrics also says how long it waited for each: less the time of the service that',
      'answered, that is the way there and back. The finishes go to the queue beside the next wave.',
      'docs/benchmarks.md explains each figure.',
    ].join('\n'),
  );
  return parts.join('\n\n');
}
