// Record once, per (jobId, key): the effect's row is inserted by its first request and never
// changed after, but for the mark a repeat leaves.
import { named } from '../../platform/named-sql.js';
import { rowsOf, type Executor, type Row } from '../../platform/sql.js';
import { EFFECT_COLUMNS, EFFECTS } from './rows.js';

type Stored = { jobId: string; key: string; qty: number | null; body: string | null };

/**
 * Invariant: per (jobId, key) one effect is ever inserted, and a repeat matches only with the
 * same qty and body (NULL for a field left out; bodies as the canonical JSON both were stored in).
 * A match marks the repeat in `duplicate_token`, set only by the update: NULL in the returned row
 * means this statement inserted it. Another qty or body updates nothing and returns no row.
 * Runs after RAISE (fence.ts), while the job's row is held.
 */
const RECORD_ONCE = named<Stored & { token: number; appliedAt: number }>(
  `INSERT INTO ${EFFECTS} (job_id, effect_key, qty, body, token, applied_at)
  VALUES (@jobId, @key, @qty, @body, @token, @appliedAt)
  ON CONFLICT (job_id, effect_key) DO UPDATE
    SET duplicate_token = excluded.token
    WHERE ${EFFECTS}.qty IS NOT DISTINCT FROM excluded.qty AND ${EFFECTS}.body IS NOT DISTINCT FROM excluded.body
  RETURNING ${EFFECT_COLUMNS}, duplicate_token`,
);

const READ = named<{ jobId: string; key: string }>(
  `SELECT ${EFFECT_COLUMNS} FROM ${EFFECTS} WHERE job_id = @jobId AND effect_key = @key`,
);

/**
 * `applied` with the row inserted, `duplicate` with the row recorded before, or `conflict` (no
 * row written; the recorded one is read to say so).
 */
export async function recordOnce(
  executor: Executor,
  stored: Stored,
  token: number,
  appliedAt: number,
): Promise<{ outcome: 'applied' | 'duplicate' | 'conflict'; row: Row | undefined }> {
  const written = rowsOf(await executor.raw(RECORD_ONCE.sql, RECORD_ONCE.bind({ ...stored, token, appliedAt })))[0];
  if (!written) {
    const row = rowsOf(await executor.raw(READ.sql, READ.bind({ jobId: stored.jobId, key: stored.key })))[0];
    return { outcome: 'conflict', row };
  }
  const duplicate = written.duplicate_token !== null && written.duplicate_token !== undefined;
  return { outcome: duplicate ? 'duplicate' : 'applied', row: written };
}
