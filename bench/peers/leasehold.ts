// leasehold's side of the peer columns, as a user runs it: the worker library (`createWorker`,
// `concurrency` jobs at once, in the benchmark process) against a `leasehold queue` child process,
// with a handler that does nothing, so each job is a claim and a finish (the finish bringing the
// next lease); and end to end, one `leasehold worker --concurrency n` process on a system of its
// own. Between slices the worker library is stopped, and its jobs wait.
import type { SqliteJournal } from '../../platform/sqlite.js';
import { createWorker } from '../../worker/index.js';
import type { ThroughputProbe } from '../library.js';
import { QueueDb } from '../measure.js';
import { localCounts, meters, postgresServerCpu, serviceCounts } from '../meters.js';
import { peakRssMiB, startService } from '../processes.js';
import { System } from '../services.js';
import { openWorkerCliProbe } from '../worker-cli.js';
import { Tally, windowProbe } from './window.js';

export interface WorkerLibraryColumn {
  /** SQLite file or PostgreSQL URL. */
  db: string;
  journal: SqliteJournal;
  concurrency: number;
  /** Leases held beyond `concurrency` (the worker's `prefetch`). */
  prefetch: number | 'auto';
  label: string;
}

/** Events that mean a job did not complete. */
const FAILED = new Set(['failed', 'lost']);

export async function openWorkerLibraryProbe(column: WorkerLibraryColumn): Promise<ThroughputProbe> {
  const { db, journal, concurrency, prefetch, label } = column;
  const queueDb = await QueueDb.open(db, journal);
  const journalArgs = queueDb.isPostgres ? [] : ['--journal', journal];
  const service = await startService(`queue (${label})`, 'queue', ['--db', db, ...journalArgs]).catch(
    async (err: unknown) => {
      await queueDb.close();
      throw err;
    },
  );
  const tally = new Tally();
  const worker = createWorker({
    queueUrl: service.url,
    // The handler sends nothing: no gateway is asked.
    gatewayUrl: service.url,
    name: label,
    concurrency,
    prefetch,
    onEvent: (event) => {
      if (event.event === 'claimed') tally.started();
      else if (event.event === 'finished') tally.ended();
      else if (event.event === 'released') tally.handedBack();
      else if (FAILED.has(event.event))
        tally.ended(new Error(`${event.event}: ${'error' in event ? event.error : ''}`));
      else if (event.event === 'claim_failed') tally.failures.first ??= event.error;
    },
  });
  let stop: AbortController | undefined;
  let running: Promise<unknown> = Promise.resolve();
  return windowProbe(
    {
      topUp: (pending) => queueDb.topUp(pending, label),
      go: async () => {
        stop = new AbortController();
        running = worker
          .run(() => undefined, { signal: stop.signal })
          .catch((err: unknown) => {
            tally.failures.first ??= err instanceof Error ? err.message : String(err);
          });
      },
      halt: async () => {
        stop?.abort();
        await running;
      },
      get completed() {
        return tally.completed;
      },
      get failures() {
        return tally.failures;
      },
      meter: meters(
        queueDb.commits,
        serviceCounts(service, 'queue', queueDb.isPostgres),
        localCounts(false, 'worker library (benchmark process)'),
        postgresServerCpu(db),
      ),
      peaks: () => ({ queue: peakRssMiB(service.pid) }),
      close: async () => {
        stop?.abort();
        await running;
        await worker.close();
        await service.stop();
        await queueDb.close();
      },
    },
    concurrency > 1 ? 4 : 1,
  );
}

/** End to end: one `leasehold worker --concurrency n` process, on a system started for it alone. */
export async function openWorkerEndToEndProbe(
  dir: string,
  concurrency: number,
  journal: SqliteJournal,
  label: string,
  prefetch: number | 'auto' = 'auto',
): Promise<ThroughputProbe> {
  const system = await System.start(dir, label, undefined, journal);
  const probe = await openWorkerCliProbe(system, 1, concurrency, label, prefetch).catch(async (err: unknown) => {
    await system.stop();
    throw err;
  });
  return {
    ...probe,
    peaks: () => ({ ...probe.peaks(), ...system.peaks() }),
    close: async () => {
      await probe.close();
      await system.stop();
    },
  };
}
