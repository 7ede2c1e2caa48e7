// What the fenced writes of a holder share: each is one UPDATE conditional on the lease guard,
// compiled once per late-finish policy, whose returned row is the answer and whose refusal is
// explained by reading the row afterwards.
import { named, type NamedStatement, type Params } from '../../platform/named-sql.js';
import { rowsOf, type Executor } from '../../platform/sql.js';
import { rowToJob } from '../rows.js';
import type { Job, LateFinishPolicy, Presented } from '../types.js';
import { explainRefusal, JOB_COLUMNS } from './get.js';
import { guardParams, leaseGuard, type GuardParams } from './guard.js';

export type Fenced<P extends Params> = Record<LateFinishPolicy, NamedStatement<P & GuardParams>>;

/** `UPDATE queue_jobs SET <set> WHERE <lease guard> <and>` under each policy. */
export function fencedUpdate<P extends Params>(set: string, and = ''): Fenced<P> {
  const statement = (policy: LateFinishPolicy) =>
    named<P & GuardParams>(
      `UPDATE queue_jobs SET ${set}
       WHERE ${leaseGuard(policy)} ${and}
       RETURNING ${JOB_COLUMNS}`,
    );
  return { reject: statement('reject'), 'if-unclaimed': statement('if-unclaimed') };
}

/** Runs a fenced update: the job as written, or the refusal (404 / 409 stale_lease) it explains. */
export async function runFenced<P extends Params>(
  trx: Executor,
  statements: Fenced<P>,
  policy: LateFinishPolicy,
  id: string,
  presented: Presented,
  now: number,
  params: P,
): Promise<Job> {
  const statement = statements[policy];
  const rows = rowsOf(await trx.raw(statement.sql, statement.bind({ ...params, ...guardParams(id, presented, now) })));
  return rows[0] ? rowToJob(rows[0]) : explainRefusal(trx, policy, id, presented, now);
}
