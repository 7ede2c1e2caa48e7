// Recording a batch of judged requests in one write transaction: each judged as record.ts judges
// one (its job's fence, its effect recorded once, `apply`, its journal entry), and the applied
// ones added to the totals in one statement at the end.
import type { Executor } from '../../platform/sql.js';
import type { Effect, EffectRequest } from '../rules.js';
import type { Recorded } from '../store.js';
import { appendJournal } from './journal.js';
import { judgeEachIn } from './record.js';
import { addAllToTotals } from './totals.js';

/**
 * Judges and records `requests` on `executor`, inside one write transaction, and answers their
 * records in the order given. The jobs are judged in the order of their ids, so that on PostgreSQL
 * two batches sharing jobs lock their rows in one order and cannot deadlock each other. A batch of
 * distinct jobs takes one statement for all fences, one for all effects and one for all journal
 * entries, `apply` running for each applied effect once all are judged. A batch holding a job
 * twice is judged one request at a time, a job's own in the order given, so the second sees the
 * first's token and effect. The totals come last, as for a single request: on PostgreSQL they
 * hold the one totals row until COMMIT.
 */
export async function recordBatchIn(
  executor: Executor,
  requests: readonly EffectRequest[],
  now: number,
  apply?: (effect: Effect) => Promise<void>,
): Promise<Recorded[]> {
  const order = judgingOrder(requests);
  const sorted = order.map((i) => requests[i]!);
  const distinct = new Set(sorted.map((request) => request.jobId)).size === sorted.length;
  const rounds = distinct ? [sorted] : sorted.map((request) => [request]);
  const recorded = new Array<Recorded>(requests.length);
  const applied: EffectRequest[] = [];
  let at = 0;
  for (const round of rounds) {
    const judgements = await judgeEachIn(executor, round, now);
    for (const [k, judgement] of judgements.entries()) {
      if (judgement.outcome !== 'applied') continue;
      if (apply) await apply(judgement.state.effect!);
      applied.push(round[k]!);
    }
    const entries = round.map((request, k) => ({ ...request, outcome: judgements[k]!.outcome, at: now }));
    for (const [k, journal] of (await appendJournal(executor, entries)).entries()) {
      recorded[order[at + k]!] = { judgement: judgements[k]!, journal };
    }
    at += round.length;
  }
  await addAllToTotals(executor, applied);
  return recorded;
}

/** The requests' positions sorted by jobId, a job's own in the order given (the sort is stable). */
export function judgingOrder(requests: readonly EffectRequest[]): number[] {
  return requests
    .map((_, i) => i)
    .sort((a, b) => {
      const x = requests[a]!.jobId;
      const y = requests[b]!.jobId;
      return x < y ? -1 : x > y ? 1 : 0;
    });
}
