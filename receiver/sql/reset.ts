// Forgetting everything (test stubs between cases): the journal, the effects, the jobs' highest
// tokens and the totals.
import type { Executor } from '../../platform/sql.js';
import { EFFECTS, JOBS, JOURNAL, TOTALS } from './rows.js';

/** Invariant: the totals row stays, at zero, so `/totals` and the next applied effect find it. */
export async function resetIn(executor: Executor): Promise<void> {
  await executor.raw(`DELETE FROM ${JOURNAL}`, []);
  await executor.raw(`DELETE FROM ${EFFECTS}`, []);
  await executor.raw(`DELETE FROM ${JOBS}`, []);
  await executor.raw(`UPDATE ${TOTALS} SET effects = 0, qty = 0 WHERE id = 1`, []);
}
