// The queue library: a job's whole cycle on the store API — finish the job in hand and claim the
// next in one transaction (store.finishAndClaim) — in this process (one or several concurrent
// loops on one store) or in several worker processes sharing the file.
import type { SqliteJournal } from '../platform/sqlite.js';
import type { Lease, QueueStore } from '../queue/index.js';
import { Fleet, type WindowResult } from './fleet.js';
import { runLoops, type Cycle } from './loops.js';
import { QueueDb, Sizing, type Probe } from './measure.js';
import { localCounts, meters, metered, postgresServerCpu } from './meters.js';

export const LEASE_MS = 30_000;

export interface ThroughputProbe extends Probe {
  /** Peak resident memory of the processes this probe started, by service name. */
  peaks(): Record<string, number | null>;
  close(): Promise<void>;
}

/** What a loop does with the job it holds: finish it and get the next, or null when none was claimable. */
export interface LeaseApi {
  claim(owner: string): Promise<Lease | null>;
  finishAndClaim(lease: Lease): Promise<Lease | null>;
}

/**
 * A cycle per job for loop `loop`: `work` on the lease in hand, then finish it and claim the
 * next in one call. Each loop keeps its lease from one slice to the next, so a slice's only
 * extra call is a claim when a loop holds nothing.
 */
export function heldLeaseCycle(
  api: LeaseApi,
  owner: (loop: number) => string,
  work?: (lease: Lease) => Promise<unknown>,
): Cycle {
  const held: (Lease | null)[] = [];
  return async (loop) => {
    held[loop] ??= await api.claim(owner(loop));
    const lease = held[loop];
    if (!lease) return false;
    // A failed step leaves the loop empty-handed; the lease it held simply expires.
    held[loop] = null;
    if (work) await work(lease);
    held[loop] = await api.finishAndClaim(lease);
    return true;
  };
}

export function storeApi(store: QueueStore): LeaseApi {
  return {
    claim: async (owner) => (await store.claimMany(owner, LEASE_MS, 1))[0] ?? null,
    finishAndClaim: async (lease) =>
      (await store.finishAndClaim(lease.id, { owner: lease.owner, token: lease.token }, null, undefined)).next,
  };
}

/** `loops` concurrent loops on one store in the benchmark process. */
export async function openLibraryProbe(
  db: string,
  loops: number,
  label: string,
  journal: SqliteJournal = 'delete',
): Promise<ThroughputProbe> {
  const queue = await QueueDb.open(db, journal);
  const meter = meters(queue.commits, localCounts(queue.isPostgres), postgresServerCpu(db));
  const sizing = new Sizing(loops > 1 ? 4 : 1);
  const cycle = heldLeaseCycle(storeApi(queue.store), (loop) => `${label}-${loop}`);
  return {
    prepare: (ctx) => queue.topUp(sizing.pending(ctx), label),
    slice: async (ms) => {
      const result = await metered(meter, () => runLoops(loops, ms, cycle));
      sizing.observe(result);
      return result;
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
  const sizing = new Sizing(1);
  return {
    prepare: (ctx) => queue.topUp(sizing.pending(ctx), label),
    slice: async (ms) => {
      let run: WindowResult | undefined;
      const result = await metered(queue.commits, async () => (run = await fleet.run(ms)));
      sizing.observe(result);
      return {
        ...result,
        statements: run?.statements ?? null,
        requests: 0,
        cpu: { 'library worker processes': run?.cpuMs ?? null },
        requestsBy: {},
      };
    },
    peaks: () => ({ 'library worker process': fleet.peakRssMiB() }),
    close: async () => {
      await fleet.stop();
      await queue.close();
    },
  };
}
