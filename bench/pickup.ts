// Pickup latency: a worker waits in a long-polling claim (`POST /claims` with `waitMs`) on an
// empty queue; a job is enqueued; how long until the waiting worker holds its lease. Timed at
// the clients, both in this process: from the enqueue's answer, and from the enqueue's start,
// to the claim's answer.
import { setTimeout as sleep } from 'node:timers/promises';
import type { SqliteJournal } from '../platform/sqlite.js';
import { QueueClient } from '../queue/client.js';
import type { Lease } from '../queue/types.js';
import { peakRssMiB, startService, type ChildService } from './processes.js';
import { percentile } from './stats.js';

export interface PickupSample {
  /** Enqueue answered → lease received by the waiting claim. */
  afterEnqueueP50Ms: number;
  afterEnqueueP99Ms: number;
  /** Enqueue sent → lease received. */
  fromEnqueueStartP50Ms: number;
  fromEnqueueStartP99Ms: number;
  samples: number;
  errors: number;
  firstError?: string;
}

export interface PickupProbe {
  journal: SqliteJournal;
  measure(samples: number): Promise<PickupSample>;
  peaks(): Record<string, number | null>;
  close(): Promise<void>;
}

const OWNER = 'bench-pickup';
/** Long enough for the claim to be waiting in the queue before the enqueue is sent. */
const SETTLE_MS = 15;
const WAIT_MS = 5_000;

export async function openPickupProbe(db: string, journal: SqliteJournal): Promise<PickupProbe> {
  const service: ChildService = await startService(`queue (pickup, ${journal})`, 'queue', [
    '--db',
    db,
    '--journal',
    journal,
  ]);
  // Separate agents: the waiting claim holds its connection while the enqueue goes out on another.
  const waiter = new QueueClient(service.url);
  const enqueuer = new QueueClient(service.url);
  let warm = false;
  return {
    journal,
    async measure(samples) {
      const afterEnqueue: number[] = [];
      const fromStart: number[] = [];
      let errors = 0;
      let firstError: string | undefined;
      const warmup = warm ? 0 : 5;
      warm = true;
      for (let i = 0; i < samples + warmup; i++) {
        try {
          let receivedAt = 0;
          const waiting = waiter.claimMany(OWNER, { max: 1, waitMs: WAIT_MS }).then((leases: Lease[]) => {
            receivedAt = performance.now();
            return leases;
          });
          await sleep(SETTLE_MS);
          const sentAt = performance.now();
          await enqueuer.enqueue({ qty: 1 });
          const answeredAt = performance.now();
          const leases = await waiting;
          if (leases.length !== 1) throw new Error(`the waiting claim got ${leases.length} leases`);
          if (i >= warmup) {
            afterEnqueue.push(receivedAt - answeredAt);
            fromStart.push(receivedAt - sentAt);
          }
          const lease = leases[0]!;
          await enqueuer.finish(lease.id, { owner: lease.owner, token: lease.token });
        } catch (err) {
          errors++;
          firstError ??= err instanceof Error ? err.message : String(err);
        }
      }
      return {
        afterEnqueueP50Ms: percentile(afterEnqueue, 50),
        afterEnqueueP99Ms: percentile(afterEnqueue, 99),
        fromEnqueueStartP50Ms: percentile(fromStart, 50),
        fromEnqueueStartP99Ms: percentile(fromStart, 99),
        samples: afterEnqueue.length,
        errors,
        ...(firstError ? { firstError } : {}),
      };
    },
    peaks: () => ({ queue: peakRssMiB(service.pid) }),
    async close() {
      waiter.close();
      enqueuer.close();
      await service.stop();
    },
  };
}
