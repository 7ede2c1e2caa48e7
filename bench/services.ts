// The queue over HTTP and the whole system, each service a child process started through the
// CLI: finish-and-claim-next with QueueClient against `leasehold queue`, and claim, send through
// `leasehold gateway` to `leasehold receiver`, finish, from several worker processes.
import { join } from 'node:path';
import type { SqliteJournal } from '../platform/sqlite.js';
import { QueueClient } from '../queue/client.js';
import { Fleet, type WindowResult } from './fleet.js';
import { LEASE_MS, heldLeaseCycle, type ThroughputProbe } from './library.js';
import { runLoops } from './loops.js';
import { QueueDb, Sizing } from './measure.js';
import { localCounts, meters, metered, postgresServerCpu, serviceCounts, sqliteCommits, type Meter } from './meters.js';
import { peakRssMiB, startBareFront, startService, type ChildService } from './processes.js';

export interface HttpColumn {
  /** SQLite file or PostgreSQL URL. */
  db: string;
  loops: number;
  label: string;
  journal?: SqliteJournal;
  /** `bare`: the same store behind a bare node:http handler (bare-front.ts), the reference for what HTTP itself costs. */
  front?: 'service' | 'bare';
}

/**
 * `leasehold queue` as a child process, driven by `loops` concurrent QueueClient loops here,
 * each finishing its job and claiming the next in one request (`POST /jobs/:id/finish` with
 * `next`).
 */
export async function openHttpProbe(column: HttpColumn): Promise<ThroughputProbe> {
  const { db, loops, label, journal = 'delete', front = 'service' } = column;
  const queue = await QueueDb.open(db, journal);
  let service: ChildService;
  try {
    service =
      front === 'service'
        ? await startService(`queue (${label})`, 'queue', ['--db', db, '--journal', journal])
        : await startBareFront(`bare queue front (${label})`, 'queue', ['--db', db]);
  } catch (err) {
    await queue.close();
    throw err;
  }
  const client = new QueueClient(service.url);
  // The client loops' CPU is counted too: they share the machine's cores with the service.
  const meter = meters(
    queue.commits,
    serviceCounts(service, front === 'service' ? 'queue' : 'bare queue front', queue.isPostgres),
    localCounts(false, 'client loops (benchmark process)'),
    postgresServerCpu(db),
  );
  const sizing = new Sizing(loops > 1 ? 4 : 1);
  const cycle = heldLeaseCycle(
    {
      claim: async (owner) => (await client.claimMany(owner, { max: 1, leaseMs: LEASE_MS }))[0] ?? null,
      finishAndClaim: async (lease) =>
        (await client.finishAndClaim(lease.id, { owner: lease.owner, token: lease.token })).next,
    },
    (loop) => `${label}-${loop}`,
  );
  return {
    prepare: (ctx) => queue.topUp(sizing.pending(ctx), label),
    slice: async (ms) => {
      const result = await metered(meter, () => runLoops(loops, ms, cycle));
      sizing.observe(result);
      return result;
    },
    peaks: (): Record<string, number | null> => ({
      [front === 'service' ? 'queue' : 'bare queue front']: peakRssMiB(service.pid),
    }),
    close: async () => {
      client.close();
      await service.stop();
      await queue.close();
    },
  };
}

/** Queue, receiver and gateway as child processes, on their own databases. */
export class System {
  private constructor(
    readonly queueDb: QueueDb,
    readonly receiverDb: string,
    readonly queue: ChildService,
    readonly receiver: ChildService,
    readonly gateway: ChildService,
  ) {}

  /**
   * `name.*.sqlite` files in `dir` (in `journal` mode), or PostgreSQL URLs (`dbs`) for the queue
   * and the receiver.
   */
  static async start(
    dir: string,
    name: string,
    dbs?: { queue: string; receiver: string },
    journal: SqliteJournal = 'delete',
  ): Promise<System> {
    const queueDbPath = dbs?.queue ?? join(dir, `${name}-queue.sqlite`);
    const receiverDb = dbs?.receiver ?? join(dir, `${name}-receiver.sqlite`);
    const queueDb = await QueueDb.open(queueDbPath, journal);
    const journalArgs = dbs ? [] : ['--journal', journal];
    const started: ChildService[] = [];
    try {
      const [queue, receiver] = await Promise.all([
        startService(`queue (${name})`, 'queue', ['--db', queueDbPath, ...journalArgs]).then(
          (s) => (started.push(s), s),
        ),
        startService(`receiver (${name})`, 'receiver', ['--db', receiverDb, ...journalArgs]).then(
          (s) => (started.push(s), s),
        ),
      ]);
      started.push(
        await startService(`gateway (${name})`, 'gateway', ['--queue', queue.url, '--receiver', receiver.url]),
      );
      const gateway = started.at(-1)!;
      return new System(queueDb, receiverDb, queue, receiver, gateway);
    } catch (err) {
      await Promise.all(started.map((s) => s.stop()));
      await queueDb.close();
      throw err;
    }
  }

  /**
   * Commits in the queue's and the receiver's SQLite files together, and the statements and
   * requests of all three services.
   */
  get meter(): Meter {
    const pg = this.queueDb.isPostgres;
    return meters(
      this.queueDb.commits,
      pg ? async () => ({}) : sqliteCommits(this.receiverDb, this.queueDb.journal),
      serviceCounts(this.queue, 'queue', pg),
      serviceCounts(this.receiver, 'receiver', pg),
      serviceCounts(this.gateway, 'gateway'),
    );
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

/**
 * `processes` of the benchmark's own minimal worker, `concurrency` loops each: send through the
 * gateway, then finish and claim the next in one request. The reference for `leasehold worker`.
 */
export async function openEndToEndProbe(
  system: System,
  processes: number,
  concurrency: number,
  label: string,
): Promise<ThroughputProbe> {
  const fleet = await Fleet.start(processes, label, {
    mode: 'e2e',
    queueUrl: system.queue.url,
    gatewayUrl: system.gateway.url,
  });
  const sizing = new Sizing(2);
  const meter = system.meter;
  return {
    prepare: (ctx) => system.queueDb.topUp(sizing.pending(ctx), label),
    slice: async (ms) => {
      let run: WindowResult | undefined;
      const result = await metered(meter, async () => (run = await fleet.run(ms, concurrency)));
      sizing.observe(result);
      return { ...result, cpu: { ...result.cpu, 'minimal worker processes': run?.cpuMs ?? null } };
    },
    peaks: () => ({ ...system.peaks(), 'e2e worker process': fleet.peakRssMiB() }),
    close: () => fleet.stop(),
  };
}
