// The optional batch extension (docs/downstream-protocol.md, batches): a downstream that offers
// batches in Leasehold-Batch must judge a batch's effects as their own requests would be judged,
// in order within a job, and refuse a batch not signed as one. Skipped for a downstream that
// offers none.
import {
  answered,
  applied,
  CaseFailure,
  CaseSkipped,
  describe,
  duplicate,
  excerpt,
  expectAnswer,
  type Case,
  type CaseContext,
} from './cases.js';
import { readBatchOffer } from '../receiver/signature.js';
import type { Answer } from './peer.js';

const OFFER_HEADER = 'leasehold-batch';

/** The offered target, resolved against the endpoint; an offer a gateway would not use fails the case. */
function offeredTarget(ctx: CaseContext, answer: Answer): URL {
  const offer = readBatchOffer(answer.headers[OFFER_HEADER], ctx.peer.url);
  if (offer === undefined) throw new CaseSkipped('the downstream offers no batches (no Leasehold-Batch header)');
  if ('target' in offer) return offer.target;
  // A gateway never sends a batch there: it ignores such an offer and sends effects one by one.
  throw new CaseFailure(
    `the first request: expected Leasehold-Batch to name a target on the endpoint's origin, ${ctx.peer.url.origin}, got ${offer.problem}`,
  );
}

/** Each result's status, when the answer is 200 with `size` results that each have one. */
function statusesOf(step: string, answer: Answer, size: number): number[] {
  const expected = `expected 200 with ${size} results`;
  const body = answer.body;
  if (answer.status !== 200 || body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new CaseFailure(`${step}: ${expected}, got ${describe(answer)}`);
  }
  const results = (body as { results?: unknown }).results;
  if (!Array.isArray(results)) {
    throw new CaseFailure(`${step}: ${expected}, got 200 without a results array: ${excerpt(body)}`);
  }
  if (results.length !== size) {
    throw new CaseFailure(
      `${step}: ${expected}, got 200 with ${results.length} result${results.length === 1 ? '' : 's'}`,
    );
  }
  const statuses = results.map((r) => (r as { status?: unknown } | null)?.status);
  const malformed = results.flatMap((r, i) =>
    Number.isSafeInteger(statuses[i]) ? [] : [`result ${i + 1}: ${excerpt(r)}`],
  );
  if (malformed.length > 0) {
    const shown = malformed.length > 3 ? [...malformed.slice(0, 3), `${malformed.length - 3} more`] : malformed;
    throw new CaseFailure(
      `${step}: expected each of the ${size} results to have an integer status, got ${shown.join(', ')}`,
    );
  }
  return statuses as number[];
}

export const BATCH_CASE: Case = {
  name: 'a batch, when offered, is judged effect by effect as single requests are',
  async run(ctx) {
    const jobId = ctx.job('batch');
    const other = ctx.job('batch-2');
    const first = await expectAnswer(ctx, 'the first request', { token: 2, body: { jobId, qty: 1 } }, applied);
    const target = offeredTarget(ctx, first);
    const effects = [
      { jobId, qty: 1, token: 2 },
      { jobId, qty: 1, token: 1 },
      { jobId, key: 'other', qty: 1, token: 1 },
      { jobId, qty: 2, token: 2 },
      { jobId: other, key: 'a', qty: 1, token: 5 },
      { jobId: other, key: 'b', qty: 1, token: 4 },
      { jobId: other, key: '', qty: 1, token: 5 },
    ];
    const expected = [200, 409, 409, 422, 201, 409, 400];
    const batch = await answered(
      'the batch',
      `200 with ${effects.length} results`,
      ctx.peer.postBatch(target, effects),
    );
    const got = statusesOf('the batch', batch, effects.length);
    if (JSON.stringify(got) !== JSON.stringify(expected)) {
      throw new CaseFailure(
        `the batch (duplicate, fenced, fenced on another key, conflict, applied, fenced by the effect before it, bad key): expected statuses ${expected.join(', ')}, got ${got.join(', ')}`,
      );
    }
    // The batch was recorded: the second job's fence is at 5 now, its effect "a" applied.
    await expectAnswer(
      ctx,
      'after the batch, effect "a" again',
      { token: 5, body: { jobId: other, key: 'a', qty: 1 } },
      duplicate,
    );
    if (ctx.signed) {
      for (const signing of ['unsigned', 'as-single'] as const) {
        const step = `a batch ${signing === 'unsigned' ? 'unsigned' : 'signed as a single effect'}`;
        const refused = await answered(
          step,
          '401',
          ctx.peer.postBatch(target, [{ jobId: ctx.job(`batch-${signing}`), qty: 1, token: 1 }], signing),
        );
        if (refused.status !== 401) throw new CaseFailure(`${step}: expected 401, got ${describe(refused)}`);
      }
    }
  },
};
