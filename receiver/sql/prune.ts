// Pruning the journal: old entries deleted a batch per statement, oldest first.
import { named } from '../../platform/named-sql.js';
import { rowsOf, type Executor } from '../../platform/sql.js';
import { JOURNAL } from './rows.js';

/**
 * Invariant: only the journal is pruned, never an effect: a job's effect row holds its highest
 * token, and a stale token would pass once its job's row was gone. One batch of entries judged
 * before `olderThan`, by the index on `at`.
 */
const PRUNE = named<{ olderThan: number; batchSize: number }>(
  `DELETE FROM ${JOURNAL} WHERE seq IN (
    SELECT seq FROM ${JOURNAL} WHERE at < @olderThan ORDER BY at LIMIT @batchSize)
  RETURNING seq`,
);

/** Deletes one batch and answers how many entries it deleted. */
export async function pruneBatch(executor: Executor, olderThan: number, batchSize: number): Promise<number> {
  return rowsOf(await executor.raw(PRUNE.sql, PRUNE.bind({ olderThan, batchSize }))).length;
}
