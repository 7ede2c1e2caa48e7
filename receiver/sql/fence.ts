// The fence, per job: the highest token a job has accepted, by any of its effects, in its row of
// receiver_jobs. Raised by the write that records an applied or duplicate effect, put back when
// the effect turns out to conflict, and read after a refusal only to explain it.
import { named } from '../../platform/named-sql.js';
import { rowsOf, type Executor, type Row } from '../../platform/sql.js';
import { EFFECTS, JOBS } from './rows.js';

/**
 * Invariant: a job's highest token only rises, and never past a request that is fenced. Raises it
 * to `token` unless it is already higher; no row back means fenced. `previous_highest_token` is
 * set only by the update, to the value it replaces: NULL in the returned row means this statement
 * inserted the job. On PostgreSQL it waits for a concurrent writer of the job, decides on its
 * committed row and locks that row even when it refuses, so requests for one job, whatever their
 * key, are serialised from here to their commit, effect and journal entry included.
 */
const RAISE = named<{ jobId: string; token: number }>(
  `INSERT INTO ${JOBS} (job_id, highest_token) VALUES (@jobId, @token)
  ON CONFLICT (job_id) DO UPDATE
    SET highest_token = excluded.highest_token, previous_highest_token = ${JOBS}.highest_token
    WHERE ${JOBS}.highest_token <= excluded.highest_token
  RETURNING previous_highest_token`,
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
 * What the fence was before this request raised it: `{highestToken}` for a job seen before,
 * `'new'` for a job this write inserted, or `'fenced'` when the token is lower than the job's.
 */
export async function raiseFence(
  executor: Executor,
  jobId: string,
  token: number,
): Promise<{ highestToken: number } | 'new' | 'fenced'> {
  const row = rowsOf(await executor.raw(RAISE.sql, RAISE.bind({ jobId, token })))[0];
  if (!row) return 'fenced';
  const previous = row.previous_highest_token;
  return previous === null || previous === undefined ? 'new' : { highestToken: Number(previous) };
}

export async function restoreFence(executor: Executor, jobId: string, highestToken: number): Promise<void> {
  await executor.raw(RESTORE.sql, RESTORE.bind({ jobId, highestToken }));
}

/** The job's row joined to the effect's: `job_id` is NULL when the job has no effect under `key`. */
export async function explainFence(executor: Executor, jobId: string, key: string): Promise<Row | undefined> {
  return rowsOf(await executor.raw(EXPLAIN.sql, EXPLAIN.bind({ jobId, key })))[0];
}
