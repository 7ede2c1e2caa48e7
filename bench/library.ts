// The queue library: a full claim + finish cycle on the store API, in this process (one or
// several concurrent loops on one store) or in several worker processes sharing the file.
import { Fleet } from './fleet.js';
import { runLoops } from './loops.js';
import { QueueDb, counted, type Probe } from './measure.js';

const LEASE_MS = 30_000;

export interface ThroughputProbe extends Probe {
  /** Peak resident memory of the processes this probe started, by service name. */
  peaks(): Record<string, number | null>;
  close(): Promise<void>;
}

/** `loops` concurrent claim + finish loops on one store in the benchmark process. */
export async function openLibraryProbe(db: string, loops: number, label: string): Promise<ThroughputProbe> {
  const queue = await QueueDb.open(db, true);
  let statements = 0;
  queue.knex.on('query', () => statements++);
  return {
    prepare: (ctx) => queue.prepare(ctx, label),
    slice: (ms) => {
      statements = 0;
      return counted(
        () => queue.commits(),
        () =>
          runLoops(loops, ms, async (loop) => {
            const owner = `${label}-${loop}`;
            const lease = await queue.store.claim(owner, LEASE_MS);
            if (!lease) return false;
            await queue.store.finish(lease.id, { owner, token: lease.token }, null);
            return true;
          }),
        () => statements,
      );
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
    prepare: (ctx) => queue.prepare(ctx, label),
    slice: (ms) =>
      counted(
        () => queue.commits(),
        () => fleet.run(ms),
      ),
    peaks: () => ({ 'library worker process': fleet.peakRssMiB() }),
    close: async () => {
      await fleet.stop();
      await queue.close();
    },
  };
}
