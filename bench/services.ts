// The queue over HTTP and the whole system, each service a child process started through the
// CLI: claim + finish with QueueClient against `leasehold queue`, and claim, send through
// `leasehold gateway` to `leasehold receiver`, finish, from several worker processes.
import { join } from 'node:path';
import { QueueClient } from '../queue/client.js';
import { changeCounter } from './bare-sqlite.js';
import { Fleet } from './fleet.js';
import type { ThroughputProbe } from './library.js';
import { runLoops } from './loops.js';
import { QueueDb, counted } from './measure.js';
import { peakRssMiB, startBareFront, startService, type ChildService, type ServiceLogs } from './processes.js';

const LEASE_MS = 30_000;

/**
 * `leasehold queue` as a child process, driven by `loops` concurrent QueueClient loops here; or,
 * with `front: 'bare'`, the same store behind a bare node:http handler (bare-front.ts), the
 * reference for what HTTP itself costs. `logs`: the service logs at that level to that file.
 */
export async function openHttpProbe(
  db: string,
  loops: number,
  label: string,
  front: 'service' | 'bare' = 'service',
  logs?: ServiceLogs,
): Promise<ThroughputProbe> {
  const queue = await QueueDb.open(db);
  let service: ChildService;
  try {
    service =
      front === 'service'
        ? await startService(`queue (${label})`, 'queue', ['--db', db], logs)
        : await startBareFront(`bare queue front (${label})`, 'queue', ['--db', db]);
  } catch (err) {
    await queue.close();
    throw err;
  }
  const client = new QueueClient(service.url);
  return {
    prepare: (ctx) => queue.prepare(ctx, label),
    slice: (ms) =>
      counted(
        () => queue.commits(),
        () =>
          runLoops(loops, ms, async (loop) => {
            const owner = `${label}-${loop}`;
            const lease = await client.claim(owner, LEASE_MS);
            if (!lease) return false;
            await client.finish(lease.id, { owner, token: lease.token });
            return true;
          }),
      ),
    peaks: (): Record<string, number | null> => (front === 'service' ? { queue: peakRssMiB(service.pid) } : {}),
    close: async () => {
      client.close();
      await service.stop();
      await queue.close();
    },
  };
}

/** Queue, receiver and gateway as child processes, on their own database files. */
export class System {
  private constructor(
    readonly queueDb: QueueDb,
    readonly receiverDb: string,
    readonly queue: ChildService,
    readonly receiver: ChildService,
    readonly gateway: ChildService,
  ) {}

  /** `dbs`: SQLite files (the default, in `dir`) or PostgreSQL URLs for the queue and the receiver. */
  static async start(dir: string, dbs?: { queue: string; receiver: string }): Promise<System> {
    const queueDbPath = dbs?.queue ?? join(dir, 'e2e-queue.sqlite');
    const receiverDb = dbs?.receiver ?? join(dir, 'e2e-receiver.sqlite');
    const queueDb = await QueueDb.open(queueDbPath);
    const started: ChildService[] = [];
    try {
      const queue = await startService('queue (e2e)', 'queue', ['--db', queueDbPath]);
      started.push(queue);
      const receiver = await startService('receiver', 'receiver', ['--db', receiverDb]);
      started.push(receiver);
      const gateway = await startService('gateway', 'gateway', ['--queue', queue.url, '--receiver', receiver.url]);
      return new System(queueDb, receiverDb, queue, receiver, gateway);
    } catch (err) {
      await Promise.all(started.map((s) => s.stop()));
      await queueDb.close();
      throw err;
    }
  }

  /** Committed write transactions in the queue's and the receiver's SQLite files together. */
  async commits(): Promise<number | null> {
    const queue = await this.queueDb.commits();
    return queue === null || this.queueDb.isPostgres ? null : queue + (await changeCounter(this.receiverDb));
  }

  peaks(): Record<string, number | null> {
    return {
      queue: peakRssMiB(this.queue.pid),
      receiver: peakRssMiB(this.receiver.pid),
      gateway: peakRssMiB(this.gateway.pid),
    };
  }

  async stop(): Promise<void> {
    await Promise.all([this.gateway.stop(), this.queue.stop(), this.receiver.stop()]);
    await this.queueDb.close();
  }
}

/** `workers` processes, each claiming, sending through the gateway and finishing, one at a time. */
export async function openEndToEndProbe(system: System, workers: number, label: string): Promise<ThroughputProbe> {
  const fleet = await Fleet.start(workers, label, {
    mode: 'e2e',
    queueUrl: system.queue.url,
    gatewayUrl: system.gateway.url,
  });
  return {
    prepare: (ctx) => system.queueDb.prepare(ctx, label),
    slice: (ms) =>
      counted(
        () => system.commits(),
        () => fleet.run(ms),
      ),
    peaks: () => ({ ...system.peaks(), 'e2e worker process': fleet.peakRssMiB() }),
    close: () => fleet.stop(),
  };
}
