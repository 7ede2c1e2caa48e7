// The finish-batch tests' kit: a gate the handlers wait at, and a worker through the counting
// proxy or on a replaced queue API, both on a clock that stands still.
import { ManualClock } from '../../testing/clock.js';
import { runWorker, type Handler, type WorkerEvent, type WorkerSummary } from '../../worker/index.js';
import type { QueueApi } from '../../worker/types.js';
import type { QueueProxy } from './proxy.js';
import type { Setup } from './setup.js';

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
