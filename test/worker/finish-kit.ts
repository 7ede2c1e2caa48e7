// The finish tests' kit: a gate the handlers wait at, a worker through the counting proxy or on
// a replaced queue API, both on a clock that stands still, and the wait for a finish that got no
// answer until its lease ran out.
import { ManualClock } from '../../testing/clock.js';
import { runWorker, type Handler, type WorkerEvent, type WorkerSummary } from '../../worker/index.js';
import type { QueueApi } from '../../worker/types.js';
import type { QueueProxy } from './proxy.js';
import { eventually, type Setup } from './setup.js';

/** A gate the handlers wait at: opened by the test, or by itself once `count` handlers wait. */
export function gate(count = Infinity): { wait(): Promise<void>; open(): void; waiting: number; full: Promise<void> } {
  let open!: () => void;
  let full!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  const fullP = new Promise<void>((resolve) => (full = resolve));
  const g = {
    waiting: 0,
    full: fullP,
    open,
    wait: () => {
      g.waiting += 1;
      if (g.waiting === count) full();
      return opened;
    },
  };
  return g;
}

export interface Run {
  events: WorkerEvent[];
  stop: AbortController;
  running: Promise<WorkerSummary>;
}

/** A worker through the proxy, on a clock that stands still: no renewal, and no estimate that gives a lease up. */
export function start(
  s: Setup,
  proxy: QueueProxy,
  handler: Handler,
  options: { concurrency: number; maxJobs?: number; leaseMs?: number },
): Run {
  const events: WorkerEvent[] = [];
  const stop = new AbortController();
  const running = runWorker({
    queueUrl: proxy.url,
    gatewayUrl: s.gateway.url,
    name: 'w1',
    leaseMs: options.leaseMs ?? 30_000,
    concurrency: options.concurrency,
    ...(options.maxJobs !== undefined ? { maxJobs: options.maxJobs } : {}),
    waitMs: 0,
    pollMs: 20,
    clock: new ManualClock(),
    signal: stop.signal,
    onEvent: (e) => events.push(e),
    handler,
  });
  return { events, stop, running };
}

/** A worker on a replaced queue API, straight to the queue, on a clock that stands still. */
export async function runOn(
  s: Setup,
  queue: QueueApi,
  options: { concurrency: number; maxJobs: number },
  handler: Handler,
): Promise<{ summary: WorkerSummary; events: WorkerEvent[] }> {
  const events: WorkerEvent[] = [];
  const summary = await runWorker({
    queueUrl: s.queue.url,
    gatewayUrl: s.gateway.url,
    name: 'w1',
    leaseMs: 30_000,
    ...options,
    waitMs: 0,
    clock: new ManualClock(),
    queue,
    onEvent: (e) => events.push(e),
    handler,
  });
  return { summary, events };
}

export const ids = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}${i + 1}`);

export async function enqueue(s: Setup, jobs: string[]): Promise<void> {
  for (const id of jobs) await s.client.enqueue({ id, qty: 1 });
}

export const finishRequests = (proxy: QueueProxy) =>
  proxy.requests.filter((r) => r === 'POST /finishes' || r === 'POST /jobs/:id/finish');

/**
 * Resolves once `jobId`'s finish has gone without an answer past the job's lease on the queue:
 * the worker has tried it again after the lease ran out, or has given it up (a `lost` event) —
 * which a worker that stops trying at the end of the lease does before it could hear anything.
 */
export async function finishOutlivedLease(events: WorkerEvent[], jobId: string): Promise<void> {
  const leaseUntil = await eventually(`job ${jobId} to be claimed`, () => {
    const claimed = events.find((e) => e.event === 'claimed' && e.job === jobId);
    return claimed?.event === 'claimed' ? claimed.leaseUntil : undefined;
  });
  await eventually(`the finish of job ${jobId} to go unanswered past its lease (until ${leaseUntil})`, () =>
    events.some(
      (e) =>
        (e.event === 'lost' && e.job === jobId) ||
        (e.event === 'call_failed' && e.op === 'finish' && e.job === jobId && e.t > leaseUntil),
    )
      ? true
      : undefined,
  );
}
