// Shared setup for the gateway tests: a real queue (SQLite file, fake clock) and a real receiver
// in this process, the gateway app in front of them, all closed after each test.
import { join } from 'node:path';
import { afterEach, expect } from 'vitest';
import type { SqliteJournal } from '../../platform/sqlite.js';
import { QueueClient } from '../../queue/client.js';
import { startQueue, type QueueService } from '../../queue/service.js';
import type { Lease } from '../../queue/types.js';
import { startReceiver, type ReceiverHandle } from '../../receiver/index.js';
import { createGatewayApp, type GatewayApp } from '../../gateway/app.js';
import type { GatewayOptions } from '../../gateway/options.js';
import { fakeClock, type FakeClock } from '../helpers/clock.js';
import { tempDir } from '../helpers/tmp.js';

const closers: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  // Last opened, first closed: the gateway before the services it calls.
  for (const close of closers.splice(0).reverse()) await close();
});

/** Runs `close` after the current test, pass or fail. */
export function closeAfterTest(close: () => Promise<void> | void): void {
  closers.push(close);
}

export interface SetupOptions {
  /** The gateway's options, over fast test defaults. */
  gateway?: Partial<GatewayOptions>;
  /** The receiver's secret (the gateway's is `gateway.secret`). */
  receiverSecret?: string;
  /** The queue's SQLite journal (default `delete`). */
  queueJournal?: SqliteJournal;
}

export interface Setup {
  dir: string;
  /** The queue's clock: leases expire only when a test advances it. */
  clock: FakeClock;
  queue: QueueService;
  queueClient: QueueClient;
  receiver: ReceiverHandle;
  app: GatewayApp;
  /** Enqueues a job and claims it for `owner`. */
  leased(id: string, qty: number, owner?: string, leaseMs?: number): Promise<Lease>;
  claim(owner: string, leaseMs?: number): Promise<Lease>;
}

export async function setup(options: SetupOptions = {}): Promise<Setup> {
  const dir = tempDir('leasehold-gateway-');
  const clock = fakeClock(Date.now());
  const queue = await startQueue({ db: join(dir, 'queue.sqlite'), clock, journal: options.queueJournal });
  closeAfterTest(() => queue.close());
  const receiver = await startReceiver({
    db: join(dir, 'receiver.sqlite'),
    // A file outlives the process, so fault injection is off unless asked for: these tests inject faults.
    testMode: true,
    ...(options.receiverSecret ? { secret: options.receiverSecret } : {}),
  });
  closeAfterTest(() => receiver.close());
  const queueClient = new QueueClient(queue.url);
  closeAfterTest(() => queueClient.close());
  const app = createGatewayApp({
    queueUrl: queue.url,
    receiverUrl: receiver.url,
    backoffBaseMs: 20,
    backoffMaxMs: 200,
    ...options.gateway,
  });
  closeAfterTest(() => app.close());

  const claim = async (owner: string, leaseMs = 60_000) => {
    const lease = await queueClient.claim(owner, leaseMs);
    if (!lease) throw new Error(`nothing claimable for ${owner}`);
    return lease;
  };
  const leased = async (id: string, qty: number, owner = 'w1', leaseMs = 60_000) => {
    await queueClient.enqueue({ id, qty });
    const lease = await claim(owner, leaseMs);
    expect(lease.id, 'the job just enqueued is the one claimed').toBe(id);
    return lease;
  };
  return { dir, clock, queue, queueClient, receiver, app, leased, claim };
}

export interface ErrorResponse {
  status: number;
  body: { error?: { code?: string; message?: string } & Record<string, unknown> };
}

/** Asserts status and code together (a failure shows both, and the body), and a real sentence. */
export function expectError(res: ErrorResponse, status: number, code: string): void {
  expect({ status: res.status, code: res.body?.error?.code }, JSON.stringify(res.body)).toEqual({ status, code });
  expect(res.body.error?.message?.length ?? 0, JSON.stringify(res.body)).toBeGreaterThan(20);
}
