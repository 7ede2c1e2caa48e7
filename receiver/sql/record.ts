// Recording one judged request: the job's fence (fence.ts), the effect recorded once (effect.ts),
// `apply` for an applied effect, the journal entry, and the applied effect added to the totals,
// all on the executor of one write transaction. Every outcome is named by `judge`, given the
// state the writes proved was there, so SQL and rule cannot silently part.
import type { Executor } from '../../platform/sql.js';
import { judge, type Effect, type EffectRequest, type JobState, type Judgement, type Outcome } from '../rules.js';
import type { Recorded } from '../store.js';
import { recordOnce } from './effect.js';
import { explainFence, raiseFence, restoreFence } from './fence.js';
import { appendJournal } from './journal.js';
import { storedFields, toEffect } from './rows.js';
import { addToTotals } from './totals.js';

/**
 * Judges and records one request on `executor`, inside a write transaction: the two conditional
 * writes, `apply` for an applied effect, then the journal entry and the totals.
 */
export async function recordIn(
  executor: Executor,
  request: EffectRequest,
  now: number,
  apply?: (effect: Effect) => Promise<void>,
): Promise<Recorded> {
  const judgement = await judgeIn(executor, request, now);
  if (judgement.outcome === 'applied' && apply) await apply(judgement.state.effect!);
  const journal = await appendJournal(executor, { ...request, outcome: judgement.outcome, at: now });
  if (judgement.outcome === 'applied') await addToTotals(executor, request);
  return { judgement, journal };
}

/**
 * The fence first, then the effect: a lower token is refused whatever the key, before the effect
 * is compared. A conflict puts the fence back, so only applied and duplicate raise it.
 */
export async function judgeIn(executor: Executor, request: EffectRequest, now: number): Promise<Judgement> {
  const stored = { jobId: request.jobId, ...storedFields(request) };
  const fence = await raiseFence(executor, request.jobId, request.token);
  if (fence === 'fenced') {
    const row = await explainFence(executor, request.jobId, stored.key);
    const state: JobState | undefined = row && {
      ...(row.job_id === null || row.job_id === undefined ? {} : { effect: toEffect(row) }),
      highestToken: Number(row.highest_token),
    };
    return asAllowed(judge(state, request, now), ['fenced'], request);
  }
  // The job as it was before this request: unknown, or known with the highest token it had.
  const job = fence === 'new' ? undefined : fence;
  const { outcome, row } = await recordOnce(executor, stored, request.token, now);
  if (outcome === 'conflict' && job) await restoreFence(executor, request.jobId, job.highestToken);
  const state = job && { ...(outcome === 'applied' || !row ? {} : { effect: toEffect(row) }), ...job };
  return asAllowed(judge(state, request, now), [outcome], request);
}

/** The rule's outcome, when it is one the write allows; otherwise the SQL and the rule disagree. */
function asAllowed(judgement: Judgement, allowed: readonly Outcome[], request: EffectRequest): Judgement {
  if (allowed.includes(judgement.outcome)) return judgement;
  // Rows are only deleted by reset(), so this means a reset ran meanwhile, or a bug.
  throw new Error(
    `Recording job "${request.jobId}" found the rules answering "${judgement.outcome}" where the database allowed ${allowed.join(' or ')}; nothing was recorded.`,
  );
}
