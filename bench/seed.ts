// Jobs for a window: tops a queue database up to a number of pending jobs in one transaction,
// through the store's own insert (enqueueIn), so rows and indexes look like real enqueues.
import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import { enqueueIn } from '../queue/knex-store.js';
import { enqueueBody, toNewJob } from '../queue/schemas.js';

const runPrefix = randomBytes(3).toString('hex');
let nextId = 0;

export async function pendingJobs(knex: Knex): Promise<number> {
  const rows: { n: number | string }[] = await knex('queue_jobs').where('status', 'pending').count({ n: '*' });
  return Number(rows[0]?.n ?? 0);
}

/** Enqueues enough jobs that `target` are pending; returns how many were added. */
export async function topUp(knex: Knex, target: number, label: string): Promise<number> {
  const missing = target - (await pendingJobs(knex));
  if (missing <= 0) return 0;
  await knex.transaction(async (trx) => {
    const now = Date.now();
    for (let i = 0; i < missing; i++) {
      const id = `${label}-${runPrefix}-${nextId++}`;
      const body = { id, qty: 1 };
      await enqueueIn(trx, toNewJob(enqueueBody.parse(body), body), now);
    }
  });
  return missing;
}
