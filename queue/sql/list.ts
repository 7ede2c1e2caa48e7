// Listings and counts: jobs by order of enqueue, a page at a time (whole, bounded by bytes, or as
// summaries without their large columns), and how many are in each status.
import type { Knex } from 'knex';
import { rowToJob, rowToSummary } from '../rows.js';
import type { ListQuery } from '../store.js';
import type { Job, JobPage, JobStatus, JobSummary, Stats } from '../types.js';
import { JOB_COLUMNS } from './get.js';

/** The columns of a JobSummary: all but payload, result and last_error. */
const SUMMARY_COLUMNS = `seq, id, qty, status, owner, token, attempts, max_attempts, priority, lease_ms,
  lease_until, deadline, run_at, dead_reason, created_at, updated_at`;

/** What a job's large columns weigh as stored, in bytes: the measure of a listing's byte budget. */
const WEIGHT =
  'COALESCE(octet_length(payload), 0) + COALESCE(octet_length(result), 0) + COALESCE(octet_length(last_error), 0)';

/** Jobs in order of enqueue, of `status` when given, after the job `after`; up to `limit` rows. */
function listed(knex: Knex, query: ListQuery, limit: number): Knex.QueryBuilder {
  const q = knex('queue_jobs').orderBy('seq').limit(limit);
  if (query.status) q.where('status', query.status);
  // Pages follow the order of enqueue; an id that names no job leaves nothing after it.
  if (query.after !== undefined) q.where('seq', '>', knex('queue_jobs').select('seq').where('id', query.after));
  return q;
}

export async function listJobs(knex: Knex, query: ListQuery): Promise<Job[]> {
  return (await listed(knex, query, query.limit).select(knex.raw(JOB_COLUMNS))).map(rowToJob);
}

/** How many of the weights, in order, fit in `maxBytes`: one at least, when there is one. */
function pageCut(weights: readonly number[], maxBytes: number): number {
  let total = 0;
  for (let i = 0; i < weights.length; i++) {
    total += weights[i]!;
    if (total > maxBytes) return Math.max(i, 1);
  }
  return weights.length;
}

/** A page of whole jobs that stops before their large columns pass `maxBytes`. */
export async function listPage(knex: Knex, query: ListQuery & { maxBytes: number }): Promise<JobPage<Job>> {
  // The weights first, one more than the page, so the page is cut before a payload is read.
  const weights = (await listed(knex, query, query.limit + 1).select('seq', knex.raw(`${WEIGHT} AS weight`))) as Array<{
    seq: number | string;
    weight: number | string;
  }>;
  const taken = pageCut(
    weights.slice(0, query.limit).map((row) => Number(row.weight)),
    query.maxBytes,
  );
  if (taken === 0) return { jobs: [], next: null };
  const last = weights[taken - 1]!.seq;
  const rows = await listed(knex, query, taken).select(knex.raw(JOB_COLUMNS)).where('seq', '<=', last);
  const jobs = rows.map(rowToJob);
  return { jobs, next: taken < weights.length && jobs.length > 0 ? jobs.at(-1)!.id : null };
}

/** A page of jobs without payload, result and last error. */
export async function listSummaries(knex: Knex, query: ListQuery): Promise<JobPage<JobSummary>> {
  const rows = await listed(knex, query, query.limit + 1).select(knex.raw(SUMMARY_COLUMNS));
  const jobs = rows.slice(0, query.limit).map(rowToSummary);
  return { jobs, next: rows.length > query.limit ? jobs.at(-1)!.id : null };
}

/** Every status with its count, zeros included. */
export async function countJobs(knex: Knex): Promise<Stats> {
  const rows: { status: JobStatus; n: number | string }[] = await knex('queue_jobs')
    .select('status')
    .count({ n: '*' })
    .groupBy('status');
  const stats: Stats = { pending: 0, leased: 0, done: 0, dead: 0 };
  for (const row of rows) stats[row.status] = Number(row.n);
  return stats;
}
