// Enqueue: a new job, or the existing one when the same id comes with the same request again.
import { named } from '../../platform/named-sql.js';
import { rowsOf, type Executor } from '../../platform/sql.js';
import { QueueError } from '../errors.js';
import { InvalidJobError, newJob } from '../rules.js';
import { rowToJob, toJsonText } from '../rows.js';
import type { Job, NewJob } from '../types.js';
import { JOB_COLUMNS } from './get.js';

type InsertParams = {
  id: string;
  qty: number;
  payload: string | null;
  maxAttempts: number;
  priority: number;
  deadline: number | null;
  runAt: number;
  request: string;
  now: number;
};

/**
 * Invariant: one job per id, never overwritten: a second enqueue of an id inserts nothing
 * (`ON CONFLICT DO NOTHING`) and is answered from the row that is there. `returning` adds to
 * what the inserted row answers.
 */
const insert = <P extends InsertParams>(returning = '') =>
  named<P>(
    `INSERT INTO queue_jobs (id, qty, payload, status, token, attempts, max_attempts, priority, deadline, run_at,
       request, created_at, updated_at)
     VALUES (@id, @qty, @payload, 'pending', 0, 0, @maxAttempts, @priority, @deadline, @runAt, @request, @now, @now)
     ON CONFLICT (id) DO NOTHING
     RETURNING ${JOB_COLUMNS}${returning}`,
  );

const INSERT = insert<InsertParams>();

/**
 * PostgreSQL: the insert also NOTIFYs @channel, once per row inserted, so other processes hear
 * of the new job when its transaction commits, and a repeated enqueue (no row) wakes nobody.
 */
const INSERT_NOTIFY = insert<InsertParams & { channel: string }>(`, pg_notify(@channel, '') AS notified`);

const EXISTING = named<{ id: string }>(`SELECT ${JOB_COLUMNS}, request FROM queue_jobs WHERE id = @id`);

/** The job `input` makes at `now`; with `notify`, the PostgreSQL channel its insert NOTIFYs. */
export async function enqueueIn(
  trx: Executor,
  input: NewJob,
  now: number,
  notify?: string,
): Promise<{ job: Job; created: boolean }> {
  let job: Job;
  try {
    job = newJob(input, now);
  } catch (err) {
    if (err instanceof InvalidJobError) throw new QueueError('invalid_request', err.message);
    throw err;
  }
  const params: InsertParams = {
    id: job.id,
    qty: job.qty,
    payload: toJsonText(job.payload),
    maxAttempts: job.maxAttempts,
    priority: job.priority,
    deadline: job.deadline,
    runAt: job.runAt,
    request: input.request,
    now,
  };
  const inserted = rowsOf(
    notify === undefined
      ? await trx.raw(INSERT.sql, INSERT.bind(params))
      : await trx.raw(INSERT_NOTIFY.sql, INSERT_NOTIFY.bind({ ...params, channel: notify })),
  );
  if (inserted[0]) return { job: rowToJob(inserted[0]), created: true };
  const existing = rowsOf(await trx.raw(EXISTING.sql, EXISTING.bind({ id: job.id })))[0];
  if (!existing) throw new Error(`job ${job.id} conflicted on insert but cannot be read`);
  if (existing.request !== input.request) {
    throw new QueueError(
      'job_exists',
      `A job with id "${job.id}" already exists with a different request. Use a new id, or send exactly the same body to get the existing job.`,
      { id: job.id },
    );
  }
  return { job: rowToJob(existing), created: false };
}
