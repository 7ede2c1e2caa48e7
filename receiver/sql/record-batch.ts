// Recording a batch of judged requests in one write transaction: each judged as record.ts judges
// one (its job's fence, its effect recorded once, `apply`, its journal entry), and the applied
// ones added to the totals in one statement at the end.
import type { Executor } from '../../platform/sql.js';
import type { Effect, EffectRequest } from '../rules.js';
import type { Recorded } from '../store.js';
import { appendJournal } from './journal.js';
import { judgeIn } from './record.js';
import { addAllToTotals } from './totals.js';

/**
 * Judges and records `requests` on `executor`, inside one write transaction, and answers their
 * records in the order given. A job's requests are judged in the order given, so the second sees
 * the first's token and effect; the jobs in the order of their ids, so that on PostgreSQL two
 * batches sharing jobs lock their rows in one order and cannot deadlock each other. The totals
 * come last, as for a single request: on PostgreSQL they hold the one totals row until COMMIT.
 */
export async function recordBatchIn(
  executor: Executor,
  requests: readonly EffectRequest[],
  now: number,
  apply?: (effect: Effect) => Promise<void>,
): Promise<Recorded[]> {
  const recorded = new Array<Recorded>(requests.length);
  const applied: EffectRequest[] = [];
  for (const i of judgingOrder(requests)) {
    const request = requests[i]!;
    const judgement = await judgeIn(executor, request, now);
    if (judgement.outcome === 'applied') {
      if (apply) await apply(judgement.state.effect!);
      applied.push(request);
    }
    const journal = await appendJournal(executor, { ...request, outcome: judgement.outcome, at: now });
    recorded[i] = { judgement, journal };
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
