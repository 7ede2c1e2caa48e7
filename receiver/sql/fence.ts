// The fence, per job: the highest token a job has accepted, by any of its effects, in its row of
// receiver_jobs. Raised by the write that records an applied or duplicate effect, put back when
// the effect turns out to conflict, and read after a refusal only to explain it.
import { named, namedRows } from '../../platform/named-sql.js';
import { rowsOf, type Executor, type Row } from '../../platform/sql.js';
import { EFFECTS, JOBS } from './rows.js';

/**
 * Invariant: a job's highest token only rises, and never past a request that is fenced. Raises
 * each row's job to its token unless it is already higher; no row back for a job means fenced.
 * `previous_highest_token` is set only by the update, to the value it replaces: NULL in a returned
 * row means this statement inserted the job. Each job appears once (an upsert may not touch a row
 * twice), in the order of their ids. On PostgreSQL it waits for a concurrent writer of each job,
 * decides on its committed row and locks that row even when it refuses, in that order, so requests
 * for one job, whatever their key, are serialised from here to their commit, effect and journal
 * entry included, and two batches sharing jobs cannot deadlock.
 */
const RAISE = namedRows<{ jobId: string; token: number }>(
  ['jobId', 'token'],
  `INSERT INTO ${JOBS} (job_id, highest_token) VALUES @rows
  ON CONFLICT (job_id) DO UPDATE
    SET highest_token = excluded.highest_token, previous_highest_token = ${JOBS}.highest_token
    WHERE ${JOBS}.highest_token <= excluded.highest_token
  RETURNING job_id, previous_highest_token`,
);

/** Invariant: a conflict raises nothing: the job's token goes back to what RAISE replaced. */
const RESTORE = named<{ jobId: string; highestToken: number }>(
  `UPDATE ${JOBS} SET highest_token = @highestToken WHERE job_id = @jobId`,
);

/** The job's highest token and the request's effect (if any), read only to explain a refused RAISE. */
const EXPLAIN = named<{ jobId: string; key: string }>(
  `SELECT j.highest_token, e.job_id, e.effect_key, e.qty, e.body, e.token, e.applied_at
  FROM ${JOBS} j LEFT JOIN ${EFFECTS} e ON e.job_id = j.job_id AND e.effect_key = @key
  WHERE j.job_id = @jobId`,
);

/**
 * What the fence was before: `{highestToken}` for a job seen before, `'new'` for a job this write
 * inserted, or `'fenced'` when the token is lower than the job's.
 */
export type FenceBefore = { highestToken: number } | 'new' | 'fenced';

/** Raises the fence of every job in `fences` (each job once, sorted by id) in one statement. */
export async function raiseFences(
  executor: Executor,
  fences: readonly { jobId: string; token: number }[],
): Promise<Map<string, FenceBefore>> {
  const raised = new Map<string, FenceBefore>(fences.map(({ jobId }) => [jobId, 'fenced']));
  for (const row of rowsOf(await executor.raw(RAISE.sql(fences.length), RAISE.bind(fences)))) {
    const previous = row.previous_highest_token;
    raised.set(
      String(row.job_id),
      previous === null || previous === undefined ? 'new' : { highestToken: Number(previous) },
    );
  }
  return raised;
}

export async function restoreFence(executor: Executor, jobId: string, highestToken: number): Promise<void> {
  await executor.raw(RESTORE.sql, RESTORE.bind({ jobId, highestToken }));
}

/** The job's row joined to the effect's: `job_id` is NULL when the job has no effect under `key`. */
export async function explainFence(executor: Executor, jobId: string, key: string): Promise<Row | undefined> {
  return rowsOf(await executor.raw(EXPLAIN.sql, EXPLAIN.bind({ jobId, key })))[0];
}
