// Jobs for a window: tops a queue database up to a number of pending jobs in one transaction,
// through the store's own insert (enqueueIn), so rows and indexes look like real enqueues.
import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import { enqueueIn } from '../queue/knex-store.js';
import { DEFAULT_MAX_ATTEMPTS, type NewJob } from '../queue/index.js';

const runPrefix = randomBytes(3).toString('hex');
let nextId = 0;

export async function pendingJobs(knex: Knex): Promise<number> {
  const rows: { n: number | string }[] = await knex('queue_jobs').where('status', 'pending').count({ n: '*' });
  return Number(rows[0]?.n ?? 0);
}

/**
 * Enqueues enough jobs that `target` are pending; returns how many were added. `runAt`: when
 * the new jobs become claimable (default now).
 */
export async function topUp(knex: Knex, target: number, label: string, runAt?: number): Promise<number> {
  const missing = target - (await pendingJobs(knex));
  if (missing <= 0) return 0;
  await knex.transaction(async (trx) => {
    const now = Date.now();
    for (let i = 0; i < missing; i++) {
      const id = `${label}-${runPrefix}-${nextId++}`;
      await enqueueIn(trx, seedJob(id, runAt), now);
    }
  });
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
