// The queue library: a full claim + finish cycle on the store API, in this process (one or
// several concurrent loops on one store) or in several worker processes sharing the file.
import { Fleet } from './fleet.js';
import { runLoops } from './loops.js';
import { QueueDb, delta, throughput, type RoundContext, type Throughput } from './measure.js';

const LEASE_MS = 30_000;

export interface ThroughputProbe {
  measure(ctx: RoundContext): Promise<Throughput>;
  /** Peak resident memory of the processes this probe started, by service name. */
  peaks(): Record<string, number | null>;
  close(): Promise<void>;
}

/** `loops` concurrent claim + finish loops on one store in the benchmark process. */
export async function openLibraryProbe(db: string, loops: number, label: string): Promise<ThroughputProbe> {
  const queue = await QueueDb.open(db);
  let statements = 0;
  queue.knex.on('query', () => statements++);
  return {
    async measure(ctx) {
      await queue.prepare(ctx, label);
      const before = await queue.commits();
      statements = 0;
      const result = await runLoops(loops, ctx.windowMs, async (loop) => {
        const owner = `${label}-${loop}`;
        const lease = await queue.store.claim(owner, LEASE_MS);
        if (!lease) return false;
        await queue.store.finish(lease.id, { owner, token: lease.token }, null);
        return true;
      });
      return throughput(result, delta(before, await queue.commits()), statements);
    },
    peaks: () => ({}),
    close: () => queue.close(),
  };
}

/** `processes` worker processes, each with its own store (connection) on the same database. */
export async function openLibraryFleetProbe(db: string, processes: number, label: string): Promise<ThroughputProbe> {
  const queue = await QueueDb.open(db);
  const fleet = await Fleet.start(processes, label, { mode: 'library', db }).catch(async (err: unknown) => {
    await queue.close();
    throw err;
  });
  return {
    async measure(ctx) {
      await queue.prepare(ctx, label);
      const before = await queue.commits();
      const result = await fleet.run(ctx.windowMs);
      return throughput(result, delta(before, await queue.commits()));
    },
    peaks: () => ({ 'library worker process': fleet.peakRssMiB() }),
    close: async () => {
      await fleet.stop();
      await queue.close();
    },
  };
}
