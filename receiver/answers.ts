// What POST /effects answers for a judgement, in one place for a single request and for each
// effect of a batch: the status and body an effect's judgement is answered with.
import { ReceiverError } from './errors.js';
import { differences, type EffectRequest, type Judgement } from './rules.js';
import type { ErrorBody } from '../platform/service-error.js';

/** One effect's answer: `201 applied`, `200 duplicate`, or an error body with its status. */
export interface EffectAnswer {
  status: number;
  body: { outcome: 'applied' | 'duplicate'; effect: unknown } | ErrorBody;
}

/** How a message names an effect: `job "a"`, or `effect "charge" of job "a"`. */
const effectWords = (request: EffectRequest) =>
  request.key === undefined ? `job "${request.jobId}"` : `effect "${request.key}" of job "${request.jobId}"`;

/** The answer to a `fenced` or `conflict` judgement, with what was asked beside what is. */
export function refusalOf(request: EffectRequest, judgement: Judgement): ReceiverError {
  const { jobId, key, token } = request;
  const { effect, highestToken } = judgement.state;
  const keyed = key === undefined ? {} : { key };
  if (judgement.outcome === 'fenced' || effect === undefined) {
    return new ReceiverError(
      'fenced',
      `Fencing token ${token} is lower than token ${highestToken} already seen for job "${jobId}": a newer lease holds this job, so stop working on it.`,
      { jobId, ...keyed, token, highestToken },
    );
  }
  const changed = differences(effect, request).map((field) =>
    field === 'qty'
      ? `qty ${String(effect.qty ?? 'left out')}, not ${String(request.qty ?? 'left out')}`
      : 'another body',
  );
  const instead = key === undefined ? 'use a new jobId, or a key,' : 'use another key';
  return new ReceiverError(
    'conflict',
    `${effectWords(request).replace(/^./, (c) => c.toUpperCase())} already has an effect with ${changed.join(' and ')}; an effect is recorded once per job and key, so ${instead} for a different effect.`,
    { jobId, ...keyed, ...(request.qty === undefined ? {} : { qty: request.qty }), effect },
  );
}

/** The answer a single POST /effects gives for `judgement` (a duplicate's also carries Idempotent-Replayed). */
export function answerOf(request: EffectRequest, judgement: Judgement): EffectAnswer {
  const { effect } = judgement.state;
  if (judgement.outcome === 'applied') return { status: 201, body: { outcome: 'applied', effect } };
  if (judgement.outcome === 'duplicate') return { status: 200, body: { outcome: 'duplicate', effect } };
  return errorAnswer(refusalOf(request, judgement));
}

export function errorAnswer(err: ReceiverError): EffectAnswer {
  return { status: err.status, body: err.toJSON() };
}
