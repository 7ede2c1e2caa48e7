// How a lease ends at the queue: finish (optionally claiming the slot's next job in the same
// request), fail, or release. None is fire-and-forget: a call that gets no answer is retried,
// since each is fenced by the token and safe to repeat. What comes of it is reported to the
// lease's keeper, which decides and reports a loss: a refusal, or no answer in time (for a
// finish, which may have landed unanswered: none before the grace after a stop is over).
import { setTimeout as delay } from 'node:timers/promises';
import { QueueError } from '../queue/client.js';
import type { WorkerEventBody } from './events.js';
import type { FinishCoalescer, ResultSize } from './finish-batch.js';
import type { LeaseKeeper } from './lease-keeper.js';
import type { ResolvedWorkerOptions } from './options.js';
import {
  claimedEvent,
  errorMessage,
  failedEarlierBy,
  failLanded,
  finishedEarlierBy,
  refusalOf,
  refusedEvent,
  releasedEarlierBy,
  type Refusal,
} from './rules.js';
import type { ClaimedLease, JobOutcome, QueueApi } from './types.js';

export interface SettleDeps {
  options: Pick<ResolvedWorkerOptions, 'leaseMs' | 'retryMs' | 'clock'>;
  queue: QueueApi;
  /** Where finishes go: coalesced with the other slots' into one request while one is on its way. */
  finishes: FinishCoalescer;
  emit(event: WorkerEventBody): void;
  /** Aborted when the grace time after a stop is over: a finish the queue has not answered yet is then given up. */
  graceSignal?: AbortSignal | undefined;
}

/** At least this many finish, fail or release attempts are made, even past the estimated end of the lease. */
const MIN_SETTLE_ATTEMPTS = 3;

type Op = 'finish' | 'fail' | 'release';

type Settled<T> = { ok: T } | { lost: true } | { unanswered: true };

export interface Finished {
  outcome: JobOutcome;
  /** The slot's next job, claimed in the finish's own request. */
  next: ClaimedLease | null;
}

/**
 * Finishes with `result` (`resultSize`: its size serialized as JSON, which places it in a
 * batch); with `claimNext`, claims the next job for the same owner in the same request — a
 * request it may share with other slots' finishes (finish-batch.ts).
 */
export async function finishJob(
  keeper: LeaseKeeper,
  deps: SettleDeps,
  result: unknown,
  resultSize: ResultSize,
  claimNext: boolean,
): Promise<Finished> {
  const { id, owner, token } = keeper.lease;
  const body = result === undefined ? { owner, token } : { owner, token, result };
  let sentAt = 0;
  const settled = await settle(
    keeper,
    deps,
    'finish',
    () => {
      // Handed over now: the request that carries it may leave later, never earlier.
      sentAt = deps.options.clock.now();
      return deps.finishes.finish(id, body, claimNext, resultSize);
    },
    // The earlier attempt landed and only its answer was lost. A next job it claimed is not
    // known to anyone: its lease runs out, and the job is claimable again then.
    async (refusal, attempt) =>
      attempt > 1 && finishedEarlierBy(refusal, owner, token)
        ? { job: await deps.queue.get(id), next: null }
        : undefined,
  );
  if (!('ok' in settled)) return { outcome: lostOutcome(keeper, settled, 'finish'), next: null };
  keeper.settled();
  deps.emit({ event: 'finished', job: id, token });
  const next = settled.ok.next;
  if (next) deps.emit(claimedEvent(next, 'finish'));
  return {
    outcome: { status: 'finished', lease: keeper.lease, job: settled.ok.job, result },
    // The next lease was claimed inside the request: its time counts from when that was sent.
    next: next ? { lease: next, claimedAt: sentAt } : null,
  };
}

export async function failJob(keeper: LeaseKeeper, deps: SettleDeps, error: string): Promise<JobOutcome> {
  const { id, owner, token } = keeper.lease;
  const settled = await settle(
    keeper,
    deps,
    'fail',
    () => deps.queue.fail(id, { owner, token, error }),
    // The earlier attempt landed and only its answer was lost.
    async (refusal, attempt) => {
      if (attempt === 1 || !failedEarlierBy(refusal, token)) return undefined;
      const job = await deps.queue.get(id);
      return failLanded(job, owner, token, error) ? job : undefined;
    },
  );
  if (!('ok' in settled)) return lostOutcome(keeper, settled, 'fail');
  keeper.settled();
  const job = settled.ok;
  deps.emit({ event: 'failed', job: id, token, error, status: job.status, runAt: job.runAt });
  return { status: 'failed', lease: keeper.lease, job, error };
}

/**
 * Hands the job back unworked: claimable at once, the attempt given back. A release that gets
 * no answer after a few attempts is given up: the lease then simply runs out. `waitedMs`: a
 * lease held ahead (`prefetch: 'auto'`) handed back after waiting that long for a turn.
 */
export async function releaseJob(keeper: LeaseKeeper, deps: SettleDeps, waitedMs?: number): Promise<JobOutcome> {
  const { id, owner, token } = keeper.lease;
  const settled = await settle(
    keeper,
    deps,
    'release',
    () => deps.queue.release(id, { owner, token }),
    async (refusal, attempt) => (attempt > 1 && releasedEarlierBy(refusal, token) ? deps.queue.get(id) : undefined),
  );
  if ('lost' in settled) return lostOutcome(keeper, settled, 'release');
  keeper.settled();
  if ('ok' in settled)
    deps.emit({ event: 'released', job: id, token, ...(waitedMs === undefined ? {} : { waitedMs }) });
  return { status: 'released', lease: keeper.lease, job: 'ok' in settled ? settled.ok : null };
}

/** The keeper's loss: the refusal it was told of, or, for a call never answered, its own verdict. */
function lostOutcome(keeper: LeaseKeeper, settled: { lost: true } | { unanswered: true }, during: Op): JobOutcome {
  const error = 'lost' in settled ? keeper.lost! : keeper.unreachable(during);
  return { status: 'lost', lease: keeper.lease, error };
}

/**
 * Runs `call` until the queue answers. A refusal is final (unless `recover` shows an earlier
 * attempt landed); a call without an answer is retried — at least a few times, since under
 * `--late-finish if-unclaimed` the queue may still take it after the lease's end, and then, for
 * finish and fail, until the estimated end has passed, and for a finish in doubt beyond it.
 */
async function settle<T>(
  keeper: LeaseKeeper,
  deps: SettleDeps,
  op: Op,
  call: () => Promise<T>,
  recover?: (refusal: Refusal, attempt: number) => Promise<T | undefined>,
): Promise<Settled<T>> {
  const { id, token } = keeper.lease;
  for (let attempt = 1; ; attempt += 1) {
    try {
      return { ok: await call() };
    } catch (err) {
      const refusal = refusalOf(err);
      if (refusal) {
        const recovered = await recover?.(refusal, attempt);
        if (recovered !== undefined) return { ok: recovered };
        deps.emit(refusedEvent(op, id, token, refusal));
        await keeper.refused(refusal, op);
        return { lost: true };
      }
      deps.emit({ event: 'call_failed', op, job: id, token, error: errorMessage(err) });
      const pastEnd = op === 'release' || deps.options.clock.now() >= keeper.leaseEndEstimate;
      if (attempt >= MIN_SETTLE_ATTEMPTS && pastEnd && !finishInDoubt(op, err, deps.graceSignal)) {
        return { unanswered: true };
      }
      await delay(deps.options.retryMs);
    }
  }
}

/**
 * A finish that got no answer may have landed, and only the queue's answer to a later attempt
 * (`finishedEarlierBy`) tells a job finished under this lease from a lost one: so it is not given
 * up when the lease runs out, only once the grace after a stop is over. A request the queue
 * answered below 500 without refusing the lease (a malformed one) changed nothing: there is
 * nothing to find out.
 */
function finishInDoubt(op: Op, err: unknown, graceSignal: AbortSignal | undefined): boolean {
  if (op !== 'finish' || graceSignal?.aborted) return false;
  return !(err instanceof QueueError && err.status < 500);
}
