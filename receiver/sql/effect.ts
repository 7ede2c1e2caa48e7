// Record once, per (jobId, key): the effect's row is inserted by its first request and never
// changed after, but for the mark a repeat leaves.
import { named, namedRows } from '../../platform/named-sql.js';
import { rowsOf, type Executor, type Row } from '../../platform/sql.js';
import { EFFECT_COLUMNS, EFFECTS } from './rows.js';

type Stored = { jobId: string; key: string; qty: number | null; body: string | null };

/**
 * Invariant: per (jobId, key) one effect is ever inserted, and a repeat matches only with the
 * same qty and body (NULL for a field left out; bodies as the canonical JSON both were stored in).
 * A match marks the repeat in `duplicate_token`, set only by the update: NULL in a returned row
 * means this statement inserted it. Another qty or body updates nothing and returns no row. Each
 * job appears once. Runs after RAISE (fence.ts), while the jobs' rows are held.
 */
const RECORD_ONCE = namedRows<Stored & { token: number; appliedAt: number }>(
  ['jobId', 'key', 'qty', 'body', 'token', 'appliedAt'],
  `INSERT INTO ${EFFECTS} (job_id, effect_key, qty, body, token, applied_at) VALUES @rows
  ON CONFLICT (job_id, effect_key) DO UPDATE
    SET duplicate_token = excluded.token
    WHERE ${EFFECTS}.qty IS NOT DISTINCT FROM excluded.qty AND ${EFFECTS}.body IS NOT DISTINCT FROM excluded.body
  RETURNING ${EFFECT_COLUMNS}, duplicate_token`,
);

const READ = named<{ jobId: string; key: string }>(
  `SELECT ${EFFECT_COLUMNS} FROM ${EFFECTS} WHERE job_id = @jobId AND effect_key = @key`,
);

type RecordedOnce = { outcome: 'applied' | 'duplicate' | 'conflict'; row: Row | undefined };

/**
 * Records each effect once, in one statement, each job once: by job id, `applied` with the row
 * inserted, `duplicate` with the row recorded before, or `conflict` (no row written; the recorded
 * one is read to say so).
 */
export async function recordEachOnce(
  executor: Executor,
  effects: readonly (Stored & { token: number })[],
  appliedAt: number,
): Promise<Map<string, RecordedOnce>> {
  const recorded = new Map<string, RecordedOnce>();
  if (effects.length === 0) return recorded;
  const rows = effects.map((effect) => ({ ...effect, appliedAt }));
  const written = new Map<string, Row>();
  for (const row of rowsOf(await executor.raw(RECORD_ONCE.sql(rows.length), RECORD_ONCE.bind(rows)))) {
    written.set(String(row.job_id), row);
  }
  for (const { jobId, key } of effects) {
    const row = written.get(jobId);
    if (!row) {
      const current = rowsOf(await executor.raw(READ.sql, READ.bind({ jobId, key })))[0];
      recorded.set(jobId, { outcome: 'conflict', row: current });
    } else {
      const duplicate = row.duplicate_token !== null && row.duplicate_token !== undefined;
      recorded.set(jobId, { outcome: duplicate ? 'duplicate' : 'applied', row });
    }
  }
  return recorded;
}
