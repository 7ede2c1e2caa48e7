// End to end with the real worker: `leasehold worker` processes started through the CLI, its
// built-in handler sending each job's qty through the gateway, counted by the "finished" lines
// they print. They run all along on a system of their own; between their slices its pending
// jobs are parked (run_at far ahead), so the workers sit idle in their long polls while the
// other columns run, instead of being frozen mid-request.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { QueueClient } from '../queue/client.js';
import type { ThroughputProbe } from './library.js';
import { Sizing, type SliceResult } from './measure.js';
import { delta, deltaByKind, meters, processCpu } from './meters.js';
import { CLI_PATH, nameProfiledChild, nodeFlags, peakRssMiB, stopChild, track } from './processes.js';
import type { System } from './services.js';

/** The flags this build's `leasehold worker` has, from its --help. */
export function workerFlags(): Set<string> {
  const help = execFileSync(process.execPath, [CLI_PATH, 'worker', '--help'], { encoding: 'utf8' });
  return new Set(help.match(/--[a-z][a-z-]+/g) ?? []);
}

/**
 * One `leasehold worker` process on `system`, tracked (killed with the benchmark) and named for
 * the CPU profiles; `stdout`: its event lines, piped to be read, or ignored.
 */
export function spawnWorker(
  system: System,
  name: string,
  extra: readonly string[],
  stdout: 'pipe' | 'ignore',
): ChildProcess {
  const child = track(
    spawn(
      process.execPath,
      [
        ...nodeFlags(),
        CLI_PATH,
        'worker',
        '--queue',
        system.queue.url,
        '--gateway',
        system.gateway.url,
        '--name',
        name,
        ...extra,
      ],
      { stdio: ['ignore', stdout, 'ignore'] },
    ),
  );
  nameProfiledChild(child.pid, `${name} (leasehold worker)`);
  return child;
}

/** Events that mean a cycle went wrong. */
const TROUBLE = new Set(['refused', 'send_failed', 'call_failed', 'claim_failed', 'lost', 'failed']);
/** Events that end a job in hand. */
const ENDED = new Set(['finished', 'failed', 'lost', 'released']);
/** Where parked jobs wait: claimable in about 30 years. */
const PARKED_RUN_AT_MS = 1_000_000_000_000;
/** How long the jobs in hand may take to end once the rest are parked. */
const SETTLE_LIMIT_MS = 5_000;

interface Line {
  t?: number;
  event?: string;
  error?: string;
}

/**
 * `workers` processes of `leasehold worker --concurrency <concurrency>` (and `--prefetch` when
 * set to a number; else the worker's default); where this build's worker has no --concurrency
 * yet, each runs one job at a time.
 */
export async function openWorkerCliProbe(
  system: System,
  workers: number,
  concurrency: number,
  label: string,
  prefetch: number | 'auto' = 'auto',
): Promise<ThroughputProbe> {
  const flags = workerFlags();
  const extra = [
    ...(flags.has('--concurrency') ? ['--concurrency', String(concurrency)] : []),
    ...(prefetch !== 'auto' && flags.has('--prefetch') ? ['--prefetch', String(prefetch)] : []),
    ...(flags.has('--log-level') ? ['--log-level', 'silent'] : []),
  ];
  const { queueDb } = system;
  const parkedUntil = () => Date.now() + PARKED_RUN_AT_MS;
  const setRunAt = (runAt: number) =>
    queueDb.execute(`UPDATE queue_jobs SET run_at = ? WHERE status = 'pending'`, [runAt]);
  const park = () => setRunAt(parkedUntil());
  const unpark = () => setRunAt(Date.now());
  // Jobs claimed and not yet ended, from the workers' own lines: reading the file instead would
  // hold its shared lock against the queue's commits.
  let inHand = 0;
  let onIdle: (() => void) | undefined;
  /** Resolves once the workers hold no job: all are back waiting for work. */
  const settled = () =>
    inHand <= 0
      ? Promise.resolve()
      : new Promise<void>((resolve) => {
          const timer = setTimeout(() => finish(), SETTLE_LIMIT_MS);
          const finish = () => {
            clearTimeout(timer);
            onIdle = undefined;
            resolve();
          };
          onIdle = finish;
        });
  await park();
  const finished: number[] = [];
  const troubles: { t: number; what: string }[] = [];
  const children: ChildProcess[] = [];
  const started = Array.from({ length: workers }, (_, i) => {
    const child = spawnWorker(system, `${label}-${i + 1}`, extra, 'pipe');
    children.push(child);
    return new Promise<void>((resolve, reject) => {
      child.once('exit', (code) => reject(new Error(`leasehold worker exited (${code}) before it started`)));
      createInterface({ input: child.stdout! }).on('line', (text) => {
        let line: Line;
        try {
          line = JSON.parse(text) as Line;
        } catch {
          return;
        }
        const event = line.event ?? '';
        if (event === 'started') resolve();
        else if (event === 'claimed') inHand++;
        if (event === 'finished') finished.push(line.t ?? Date.now());
        else if (TROUBLE.has(event)) troubles.push({ t: line.t ?? Date.now(), what: `${event}: ${line.error ?? ''}` });
        if (ENDED.has(event) && --inHand <= 0) onIdle?.();
      });
    });
  });
  const kill = () => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  };
  try {
    await Promise.all(started);
  } catch (err) {
    kill();
    throw err;
  }
  // Rings the bell: an enqueue over HTTP wakes the waiting claims at once (jobs written to the
  // file by the benchmark would wait for the queue's re-poll).
  const bell = new QueueClient(system.queue.url);
  const within = (list: number[], from: number, to: number) => list.filter((t) => t >= from && t <= to);
  const sizing = new Sizing(2);
  const meter = meters(
    system.meter,
    processCpu(() => children.map((child) => child.pid!), 'leasehold worker processes'),
  );
  return {
    // New jobs are parked from the start: none is claimed before the slice begins.
    prepare: (slice) => system.queueDb.topUp(sizing.pending(slice), label, parkedUntil()),
    async slice(ms): Promise<SliceResult> {
      const before = await meter();
      const from = Date.now();
      await unpark();
      await bell.enqueue({ qty: 1 });
      await sleep(ms - (Date.now() - from));
      await park();
      await settled();
      // Lines of the last finishes may still be in the pipe.
      await sleep(20);
      const after = await meter();
      const settledAt = Date.now();
      // As the other columns count theirs: the jobs in hand when the window closes run to their end.
      const done = within(finished, from, settledAt);
      const trouble = troubles.filter((x) => x.t >= from && x.t <= settledAt);
      const result = {
        jobs: done.length,
        elapsedMs: Math.max(ms, Math.max(from, ...done) - from),
        drained: false,
        errors: trouble.length,
        ...(trouble[0] ? { firstError: trouble[0].what } : {}),
        transactions: delta(before.transactions, after.transactions) ?? null,
        statements: delta(before.statements, after.statements) ?? null,
        requests: delta(before.requests, after.requests) ?? null,
        cpu: deltaByKind(before.cpu, after.cpu),
        requestsBy: deltaByKind(before.requestsBy, after.requestsBy),
      };
      sizing.observe(result);
      return result;
    },
    peaks: () => ({ 'leasehold worker process': Math.max(...children.map((c) => peakRssMiB(c.pid!) ?? 0)) }),
    async close() {
      bell.close();
      await Promise.all(children.map((child) => stopChild(child, 2_000)));
    },
  };
}
