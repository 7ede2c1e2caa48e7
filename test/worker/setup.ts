// Shared setup for the worker tests: the real queue (SQLite file, a clock the test can move
// ahead), receiver and gateway in this process on free ports, a worker that records its
// events, and everything closed after each test.
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach } from 'vitest';
import { startGateway, type GatewayService } from '../../gateway/service.js';
import { QueueClient } from '../../queue/client.js';
import { startQueue, type QueueService } from '../../queue/service.js';
import type { Clock, Lease } from '../../queue/types.js';
import { createWorker, type QueueApi, type Worker, type WorkerEvent, type WorkerOptions } from '../../worker/index.js';
import { startReceiver, type ReceiverHandle } from '../../receiver/index.js';
import { tempDir } from '../helpers/tmp.js';

const closers: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  // Last opened, first closed: workers, then the gateway, then the services it calls.
  for (const close of closers.splice(0).reverse()) await close();
});

export function closeAfterTest(close: () => Promise<void> | void): void {
  closers.push(close);
}

export interface Setup {
  dir: string;
  queue: QueueService;
  receiver: ReceiverHandle;
  gateway: GatewayService;
  /** A plain client, for the test's own calls (enqueue, a second owner's claim, reads). */
  client: QueueClient;
  /** Moves the queue's clock ahead: leases end on the queue while the worker's clock stays put. */
  advanceQueueClock(ms: number): void;
  /** A worker on these services; its events are collected in `events`. */
  worker(options?: Partial<WorkerOptions>): { worker: Worker; events: WorkerEvent[] };
  /** Moves the queue's clock past the job's lease and claims it for `owner`, who gets the next token. */
  takeOver(jobId: string, owner?: string): Promise<Lease>;
  /** The queue calls a worker makes, through `client`, with some of them replaced (a fault). */
  queueApi(overrides: Partial<QueueApi>): QueueApi;
}

export async function setup(): Promise<Setup> {
  const dir = tempDir('leasehold-worker-');
  let skewMs = 0;
  const clock: Clock = { now: () => Date.now() + skewMs };
  const queue = await startQueue({ db: join(dir, 'queue.sqlite'), clock });
  closeAfterTest(() => queue.close());
  const receiver = await startReceiver({ db: join(dir, 'receiver.sqlite') });
  closeAfterTest(() => receiver.close());
  const gateway = await startGateway({ port: 0, queueUrl: queue.url, receiverUrl: receiver.url });
  closeAfterTest(() => gateway.close());
  const client = new QueueClient(queue.url);
  closeAfterTest(() => client.close());

  const advanceQueueClock = (ms: number) => {
    skewMs += ms;
  };
  return {
    dir,
    queue,
    receiver,
    gateway,
    client,
    advanceQueueClock,
    worker(options = {}) {
      const events: WorkerEvent[] = [];
      const worker = createWorker({
        queueUrl: queue.url,
        gatewayUrl: gateway.url,
        name: 'w1',
        leaseMs: 900,
        pollMs: 50,
        onEvent: (event) => events.push(event),
        ...options,
      });
      closeAfterTest(() => worker.close());
      return { worker, events };
    },
    async takeOver(jobId, owner = 'thief') {
      const job = await client.get(jobId);
      if (job.leaseUntil !== null) advanceQueueClock(Math.max(0, job.leaseUntil - clock.now()) + 1);
      const lease = await client.claim(owner, 60_000);
      if (!lease || lease.id !== jobId) throw new Error(`expected to take over ${jobId}, got ${JSON.stringify(lease)}`);
      return lease;
    },
    queueApi(overrides) {
      return {
        claim: (owner, leaseMs, options) => client.claim(owner, leaseMs, options),
        claimMany: (owner, input, options) => client.claimMany(owner, input, options),
        heartbeat: (id, input, options) => client.heartbeat(id, input, options),
        finish: (id, input, options) => client.finish(id, input, options),
        finishAndClaim: (id, input, next, options) => client.finishAndClaim(id, input, next, options),
        finishMany: (owner, finishes, options) => client.finishMany(owner, finishes, options),
        fail: (id, input, options) => client.fail(id, input, options),
        release: (id, input, options) => client.release(id, input, options),
        get: (id, options) => client.get(id, options),
        ...overrides,
      };
    },
  };
}

/** Polls `check` until it returns a value other than undefined, or fails after `timeoutMs`. */
export async function eventually<T>(
  what: string,
  check: () => T | undefined | Promise<T | undefined>,
  timeoutMs = 10_000,
): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > until) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(20);
  }
}

/** The names of the events, in order, for one job. */
export function timeline(events: WorkerEvent[], jobId?: string): string[] {
  return events
    .filter((e) => jobId === undefined || ('job' in e && e.job === jobId))
    .map((e) =>
      e.event === 'refused' ? `refused:${e.op}` : e.event === 'renewed' && e.stage ? `renewed:${e.stage}` : e.event,
    );
}
