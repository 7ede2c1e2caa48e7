// One job under one lease: run the handler while the keeper renews, then finish — or fail
// when the handler threw — and take the queue's answer as the outcome. A lost lease ends as
// LeaseLostError and is never finished or failed under.
import { setTimeout as delay } from 'node:timers/promises';
import { GatewayError } from '../gateway/client.js';
import type { Job } from '../queue/types.js';
import { LeaseLostError } from './errors.js';
import type { WorkerEventBody } from './events.js';
import { LeaseKeeper } from './lease-keeper.js';
import type { ResolvedWorkerOptions } from './options.js';
import { errorMessage, finishedEarlierBy, refusalOf, refusedEvent } from './rules.js';
import type { ClaimedLease, EffectSender, Handler, JobContext, JobOutcome, QueueApi, SendOutcome } from './types.js';

export interface RunLeaseDeps {
  options: ResolvedWorkerOptions;
  queue: QueueApi;
  renewals: Pick<QueueApi, 'heartbeat'>;
  gateway: EffectSender;
  emit(event: WorkerEventBody): void;
  /** Aborted when the worker is told to stop: the job then has `drainMs` left before it is abandoned. */
  stopSignal?: AbortSignal | undefined;
}

/** At least this many finish or fail attempts are made, even past the estimated end of the lease. */
const MIN_SETTLE_ATTEMPTS = 3;
/** A failure is kept as `lastError` by the queue; a bounded one always fits its limit. */
const MAX_ERROR_CHARS = 4_096;

export async function runLease(claimed: ClaimedLease, handler: Handler, deps: RunLeaseDeps): Promise<JobOutcome> {
  const keeper = new LeaseKeeper({ claimed, options: deps.options, renewals: deps.renewals, emit: deps.emit });
  keeper.start();
  const undrain = drainOnStop(keeper, deps);
  let failure: { error: unknown } | undefined;
  let result: unknown;
  try {
    result = await handler(contextFor(keeper, deps));
  } catch (error) {
    failure = { error };
  } finally {
    undrain();
  }
  // Decide only once every answer is in: a renewal in flight may still report the loss.
  await keeper.stop();
  const lease = keeper.lease;
  if (keeper.lost) return { status: 'lost', lease, error: keeper.lost };
  if (!failure && !isJson(result)) failure = { error: new Error('the handler returned a value that is not JSON') };
  if (failure) {
    const abandoned = keeper.abandoned;
    const error = abandoned ? `${abandoned.message} (${errorMessage(failure.error)})` : errorMessage(failure.error);
    return failJob(keeper, deps, error.slice(0, MAX_ERROR_CHARS), abandoned ? 0 : undefined);
  }
  await deps.options.hooks.beforeFinish?.(lease);
  return finishJob(keeper, deps, result);
}

function contextFor(keeper: LeaseKeeper, deps: RunLeaseDeps): JobContext {
  return {
    get lease() {
      return keeper.lease;
    },
    get signal() {
      return keeper.signal;
    },
    get lost() {
      return keeper.lost;
    },
    send: (qty) => sendEffect(keeper, deps, qty),
    renew: () => keeper.renew(),
    stage: (name) => keeper.renew(name),
  };
}

async function sendEffect(keeper: LeaseKeeper, deps: RunLeaseDeps, qty: number | undefined): Promise<SendOutcome> {
  return keeper.send(async (signal) => {
    const lease = keeper.lease;
    const ref = { job: lease.id, token: lease.token };
    const amount = qty ?? lease.qty;
    await deps.options.hooks.beforeSend?.(lease);
    try {
      const sent = await deps.gateway.send(
        { jobId: lease.id, owner: lease.owner, token: lease.token, qty: amount },
        { signal },
      );
      deps.emit({ event: 'sent', ...ref, qty: amount, outcome: sent.outcome, effectToken: sent.effect.token });
      return sent;
    } catch (err) {
      if (signal.aborted && err === signal.reason) {
        deps.emit({ event: 'send_failed', ...ref, code: 'aborted', error: `aborted: ${errorMessage(err)}` });
        throw err;
      }
      const refusal = refusalOf(err);
      if (err instanceof GatewayError && (refusal || err.status < 500)) {
        deps.emit({
          event: 'refused',
          op: 'send',
          ...ref,
          status: err.status,
          code: err.code,
          ...(refusal ? { reason: refusal.reason } : {}),
          ...(refusal?.current ? { current: refusal.current } : {}),
          error: err.message,
        });
      } else {
        deps.emit({
          event: 'send_failed',
          ...ref,
          code: err instanceof GatewayError ? err.code : 'error',
          error: errorMessage(err),
        });
      }
      if (refusal) throw keeper.refused(refusal, 'send');
      throw err;
    }
  });
}

async function finishJob(keeper: LeaseKeeper, deps: RunLeaseDeps, result: unknown): Promise<JobOutcome> {
  const { id, owner, token } = keeper.lease;
  const settled = await settle(keeper, deps, 'finish', () =>
    deps.queue.finish(id, result === undefined ? { owner, token } : { owner, token, result }),
  );
  if (settled instanceof LeaseLostError) return { status: 'lost', lease: keeper.lease, error: settled };
  deps.emit({ event: 'finished', job: id, token });
  return { status: 'finished', lease: keeper.lease, job: settled, result };
}

async function failJob(
  keeper: LeaseKeeper,
  deps: RunLeaseDeps,
  error: string,
  retryInMs: number | undefined,
): Promise<JobOutcome> {
  const { id, owner, token } = keeper.lease;
  const body = retryInMs === undefined ? { owner, token, error } : { owner, token, error, retryInMs };
  const settled = await settle(keeper, deps, 'fail', () => deps.queue.fail(id, body));
  if (settled instanceof LeaseLostError) return { status: 'lost', lease: keeper.lease, error: settled };
  deps.emit({ event: 'failed', job: id, token, error, status: settled.status, runAt: settled.runAt });
  return { status: 'failed', lease: keeper.lease, job: settled, error };
}

/**
 * Finish or fail, and never ignore the answer: a refusal is a lost lease. A call that gets no
 * answer is retried — at least a few times, since under `--late-finish if-unclaimed` the queue
 * may still take it after the lease's end, and then until the estimated end has passed.
 */
async function settle(
  keeper: LeaseKeeper,
  deps: RunLeaseDeps,
  op: 'finish' | 'fail',
  call: () => Promise<Job>,
): Promise<Job | LeaseLostError> {
  const { id, owner, token } = keeper.lease;
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await call();
    } catch (err) {
      const refusal = refusalOf(err);
      if (refusal && op === 'finish' && attempt > 1 && finishedEarlierBy(refusal, owner, token)) {
        // The earlier attempt landed and only its answer was lost.
        return deps.queue.get(id);
      }
      if (refusal) {
        deps.emit(refusedEvent(op, id, token, refusal));
        return lost(
          deps,
          new LeaseLostError({
            jobId: id,
            expected: { owner, token },
            during: op,
            reason: refusal.reason,
            current: refusal.current,
          }),
        );
      }
      deps.emit({ event: 'call_failed', op, job: id, token, error: errorMessage(err) });
      if (attempt >= MIN_SETTLE_ATTEMPTS && deps.options.clock.now() >= keeper.leaseEndEstimate) {
        return lost(
          deps,
          new LeaseLostError({ jobId: id, expected: { owner, token }, during: op, reason: 'queue_unreachable' }),
        );
      }
      await delay(deps.options.retryMs);
    }
  }
}

function lost(deps: RunLeaseDeps, error: LeaseLostError): LeaseLostError {
  deps.emit({
    event: 'lost',
    job: error.jobId,
    token: error.expected.token,
    during: error.during,
    reason: error.reason,
    ...(error.current ? { current: error.current } : {}),
    error: error.message,
  });
  return error;
}

/** On stop, the job in hand gets `drainMs` to end by itself; then its handler is aborted. */
function drainOnStop(keeper: LeaseKeeper, deps: RunLeaseDeps): () => void {
  const stop = deps.stopSignal;
  if (!stop) return () => {};
  let timer: NodeJS.Timeout | undefined;
  const onStop = () => {
    timer = setTimeout(
      () => keeper.abandon(new Error(`worker "${deps.options.name}" stopped before the job was done`)),
      deps.options.drainMs,
    );
  };
  if (stop.aborted) onStop();
  else stop.addEventListener('abort', onStop, { once: true });
  return () => {
    clearTimeout(timer);
    stop.removeEventListener('abort', onStop);
  };
}

function isJson(value: unknown): boolean {
  if (value === undefined) return true;
  try {
    JSON.stringify(value);
    return true;
  } catch {
    return false;
  }
}
