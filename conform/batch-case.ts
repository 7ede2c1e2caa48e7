// The optional batch extension (docs/downstream-protocol.md, batches): a downstream that offers
// batches in Leasehold-Batch must judge a batch's effects as their own requests would be judged,
// in order within a job, and refuse a batch not signed as one. Skipped for a downstream that
// offers none.
import { CaseFailure, CaseSkipped, type Case, type CaseContext } from './cases.js';
import type { Answer } from './peer.js';

const OFFER_HEADER = 'leasehold-batch';

/** The offered target, resolved against the endpoint; one on another origin fails the case. */
function offeredTarget(ctx: CaseContext, answer: Answer): URL {
  const offered = answer.headers[OFFER_HEADER];
  if (typeof offered !== 'string')
    throw new CaseSkipped('the downstream offers no batches (no Leasehold-Batch header)');
  const target = new URL(offered, ctx.peer.url);
  if (target.origin !== ctx.peer.url.origin) {
    throw new CaseFailure(
      `Leasehold-Batch offers ${JSON.stringify(offered)}, which is not on the endpoint's origin; a gateway never sends there`,
    );
  }
  return target;
}

function statusesOf(step: string, answer: Answer, size: number): number[] {
  const results = (answer.body as { results?: unknown } | undefined)?.results;
  if (answer.status !== 200 || !Array.isArray(results) || results.length !== size) {
    throw new CaseFailure(
      `${step}: expected 200 with ${size} results, got ${answer.status} ${JSON.stringify(answer.body)}`,
    );
  }
  return results.map((r) => Number((r as { status?: unknown } | null)?.status));
}

export const BATCH_CASE: Case = {
  name: 'a batch, when offered, is judged effect by effect as single requests are',
  async run(ctx) {
    const jobId = ctx.job('batch');
    const other = ctx.job('batch-2');
    const first = await ctx.peer.post({ token: 2, body: { jobId, qty: 1 } });
    if (first.status !== 201) throw new CaseFailure(`the first request: expected 201 applied, got ${first.status}`);
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
    const got = statusesOf('the batch', await ctx.peer.postBatch(target, effects), effects.length);
    if (JSON.stringify(got) !== JSON.stringify(expected)) {
      throw new CaseFailure(
        `the batch (duplicate, fenced, fenced on another key, conflict, applied, fenced by the effect before it, bad key): expected statuses ${expected.join(', ')}, got ${got.join(', ')}`,
      );
    }
    // The batch was recorded: the second job's fence is at 5 now, its effect "a" applied.
    const after = await ctx.peer.post({ token: 5, body: { jobId: other, key: 'a', qty: 1 } });
    if (after.status !== 200)
      throw new CaseFailure(`after the batch, effect "a" again: expected 200 duplicate, got ${after.status}`);
    if (ctx.signed) {
      for (const signing of ['unsigned', 'as-single'] as const) {
        const refused = await ctx.peer.postBatch(
          target,
          [{ jobId: ctx.job(`batch-${signing}`), qty: 1, token: 1 }],
          signing,
        );
        if (refused.status !== 401) {
          throw new CaseFailure(
            `a batch ${signing === 'unsigned' ? 'unsigned' : 'signed as a single effect'}: expected 401, got ${refused.status}`,
          );
        }
      }
    }
  },
};
