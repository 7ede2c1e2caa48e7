// The batch extension of POST /effects: several effects judged and committed in one
// transaction, each answered with the status and body its own POST /effects would have had.
// The route is the effect route's own target with `batch` added to its query, which every
// answer of fencedEffects names in the Leasehold-Batch header.
import { answerOf, errorAnswer, type EffectAnswer } from './answers.js';
import { ReceiverError } from './errors.js';
import type { EffectRequest } from './rules.js';
import type { Recorded } from './store.js';

/** Names, on every answer of an effect route that takes batches, the target a batch is posted to. */
export const BATCH_HEADER = 'Leasehold-Batch';
/** The query parameter that makes a POST to the effect route a batch. */
export const BATCH_PARAMETER = 'batch';

/** `/effects` → `/effects?batch`; `/hooks?x=1` → `/hooks?x=1&batch`; a batch's target is its own. */
export function batchTargetOf(target: string): string {
  if (isBatchTarget(target)) return target;
  return `${target}${target.includes('?') ? '&' : '?'}${BATCH_PARAMETER}`;
}

/** Whether the request target (path and query, as sent) names the batch route. */
export function isBatchTarget(target: string): boolean {
  const q = target.indexOf('?');
  return q >= 0 && new URLSearchParams(target.slice(q + 1)).has(BATCH_PARAMETER);
}

export interface BatchRecorder {
  /** All of them in one transaction (`store.recordMany`, with `apply`); throws as that does. */
  recordMany(requests: EffectRequest[]): Promise<Recorded[]>;
  /** One of them alone, as a single POST /effects records it (`apply_failed` included). */
  record(request: EffectRequest): Promise<Recorded>;
  /** Told of each judged effect (metrics, the log). */
  judged(request: EffectRequest, recorded: Recorded): void;
}

/**
 * Each effect's answer, in the order given: a bad effect's 400, the others judged together in
 * one transaction. When that transaction fails for a reason that may be one effect's (`apply`
 * threw, the totals refused an effect, an unexpected error), the effects are recorded again one
 * transaction each, in order, so each gets the answer it would have had alone and one cannot fail
 * the others. A database that stays busy or unreachable fails the whole batch (`503 busy`): each
 * effect alone would meet it too, and the sender retries each.
 */
export async function judgeBatch(
  parsed: ReadonlyArray<EffectRequest | ReceiverError>,
  recorder: BatchRecorder,
): Promise<EffectAnswer[]> {
  const requests = parsed.filter((item): item is EffectRequest => !(item instanceof ReceiverError));
  const records = new Map<EffectRequest, EffectAnswer>();
  let together: Recorded[] | undefined;
  try {
    together = await recorder.recordMany(requests);
  } catch (err) {
    if (err instanceof ReceiverError && err.code === 'busy') throw err;
  }
  if (together) {
    requests.forEach((request, i) => records.set(request, judged(request, together[i]!, recorder)));
  } else {
    for (const request of requests) {
      try {
        records.set(request, judged(request, await recorder.record(request), recorder));
      } catch (err) {
        records.set(request, errorAnswer(asReceiverError(err)));
      }
    }
  }
  return parsed.map((item) => (item instanceof ReceiverError ? errorAnswer(item) : records.get(item)!));
}

function judged(request: EffectRequest, recorded: Recorded, recorder: BatchRecorder): EffectAnswer {
  recorder.judged(request, recorded);
  return answerOf(request, recorded.judgement);
}

function asReceiverError(err: unknown): ReceiverError {
  if (err instanceof ReceiverError) return err;
  return new ReceiverError(
    'internal',
    'The receiver failed unexpectedly on this effect; the error is in its log. Retry it.',
    {},
    undefined,
    { cause: err },
  );
}
