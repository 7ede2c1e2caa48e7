// Jobs for a window: tops a queue up to a number of pending jobs through the store's public
// enqueue, many at once (they share transactions), so rows and indexes are real enqueues.
import { randomBytes } from 'node:crypto';
import { DEFAULT_MAX_ATTEMPTS, type NewJob, type QueueStore } from '../queue/index.js';

const runPrefix = randomBytes(3).toString('hex');
let nextId = 0;
/** Enqueues in flight at once: enough to fill the group commit's batches. */
const IN_FLIGHT = 256;

export async function pendingJobs(store: QueueStore): Promise<number> {
  return (await store.stats()).pending;
}

/**
 * Enqueues enough jobs that `target` are pending; returns how many were added. `runAt`: when
 * the new jobs become claimable (default now).
 */
export async function topUp(store: QueueStore, target: number, label: string, runAt?: number): Promise<number> {
  const missing = target - (await pendingJobs(store));
  if (missing <= 0) return 0;
  let next = 0;
  const lane = async () => {
    while (next < missing) {
      next++;
      await store.enqueue(seedJob(`${label}-${runPrefix}-${nextId++}`, runAt));
    }
  };
  await Promise.all(Array.from({ length: Math.min(IN_FLIGHT, missing) }, lane));
  return missing;
}

/** What `POST /jobs {id, qty: 1}` hands the store once its schema has filled in the defaults. */
function seedJob(id: string, runAt: number | undefined): NewJob {
  return {
    id,
    qty: 1,
    payload: null,
    maxAttempts: DEFAULT_MAX_ATTEMPTS,
    priority: 0,
    runAt,
    deadline: undefined,
    deadlineMs: undefined,
    request: JSON.stringify(runAt === undefined ? { id, qty: 1 } : { id, qty: 1, runAt }),
  };
}
