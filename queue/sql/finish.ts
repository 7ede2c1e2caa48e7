// Finish: the holder records the job's result.
import type { Executor } from '../../platform/sql.js';
import { toJsonText } from '../rows.js';
import type { Job, LateFinishPolicy, Presented } from '../types.js';
import { fencedUpdate, runFenced } from './fenced.js';

/** Invariant: only the current holder, with its lease valid, makes a job `done` (the lease guard). */
const FINISH = fencedUpdate<{ result: string | null }>(`status = 'done', result = @result, updated_at = @now`);

export function finishIn(
  trx: Executor,
  policy: LateFinishPolicy,
  id: string,
  presented: Presented,
  result: unknown,
  now: number,
): Promise<Job> {
  return runFenced(trx, FINISH, policy, id, presented, now, { result: toJsonText(result) });
}
