// Recording one judged request: the job's fence (fence.ts), the effect recorded once (effect.ts),
// `apply` for an applied effect, the journal entry, and the applied effect added to the totals,
// all on the executor of one write transaction. Every outcome is named by `judge`, given the
// state the writes proved was there, so SQL and rule cannot silently part.
import type { Executor } from '../../platform/sql.js';
import { judge, type Effect, type EffectRequest, type JobState, type Judgement, type Outcome } from '../rules.js';
import type { Recorded } from '../store.js';
import { recordEachOnce } from './effect.js';
import { explainFence, raiseFences, restoreFence } from './fence.js';
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
  const [judgement] = await judgeEachIn(executor, [request], now);
  if (judgement!.outcome === 'applied' && apply) await apply(judgement!.state.effect!);
  const [journal] = await appendJournal(executor, [{ ...request, outcome: judgement!.outcome, at: now }]);
  if (judgement!.outcome === 'applied') await addToTotals(executor, request);
  return { judgement: judgement!, journal: journal! };
}

/**
 * Judges `requests`, each of another job and in the order of their ids, with one statement for
 * all their fences and one for all their effects. The fence first, then the effect: a lower token
 * is refused whatever the key, before the effect is compared. A conflict puts the fence back, so
 * only applied and duplicate raise it. Refusals are explained by a read each.
 */
export async function judgeEachIn(
  executor: Executor,
  requests: readonly EffectRequest[],
  now: number,
): Promise<Judgement[]> {
  const fences = await raiseFences(
    executor,
    requests.map(({ jobId, token }) => ({ jobId, token })),
  );
  const open = requests.filter((request) => fences.get(request.jobId) !== 'fenced');
  const effects = await recordEachOnce(
    executor,
    open.map((request) => ({ jobId: request.jobId, ...storedFields(request), token: request.token })),
    now,
  );
  const judgements: Judgement[] = [];
  for (const request of requests) {
    const fence = fences.get(request.jobId)!;
    if (fence === 'fenced') {
      const row = await explainFence(executor, request.jobId, storedFields(request).key);
      const state: JobState | undefined = row && {
        ...(row.job_id === null || row.job_id === undefined ? {} : { effect: toEffect(row) }),
        highestToken: Number(row.highest_token),
      };
      judgements.push(asAllowed(judge(state, request, now), ['fenced'], request));
      continue;
    }
    // The job as it was before this request: unknown, or known with the highest token it had.
    const job = fence === 'new' ? undefined : fence;
    const { outcome, row } = effects.get(request.jobId)!;
    if (outcome === 'conflict' && job) await restoreFence(executor, request.jobId, job.highestToken);
    const state = job && { ...(outcome === 'applied' || !row ? {} : { effect: toEffect(row) }), ...job };
    judgements.push(asAllowed(judge(state, request, now), [outcome], request));
  }
  return judgements;
}

/** The rule's outcome, when it is one the write allows; otherwise the SQL and the rule disagree. */
function asAllowed(judgement: Judgement, allowed: readonly Outcome[], request: EffectRequest): Judgement {
  if (allowed.includes(judgement.outcome)) return judgement;
  // Rows are only deleted by reset(), so this means a reset ran meanwhile, or a bug.
  throw new Error(
    `Recording job "${request.jobId}" found the rules answering "${judgement.outcome}" where the database allowed ${allowed.join(' or ')}; nothing was recorded.`,
  );
}
