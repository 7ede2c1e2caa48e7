// One job under one lease: run the handler while the keeper renews, then finish — claiming the
// slot's next job in the same request when asked — or fail when the handler threw, or release
// when the worker stopped and the grace time ran out (or the handler gave the job up to the
// stop). A lost lease ends as LeaseLostError and is never finished, failed or released under.
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { Lease } from '../queue/types.js';
import type { LeaseLostError } from './errors.js';
import type { WorkerEventBody } from './events.js';
import { MAX_JSON_DEPTH, MAX_JSON_KEYS, scanJson } from '../platform/json-limits.js';
import { QUEUE_BODY_LIMIT_BYTES, type FinishCoalescer, type ResultSize } from './finish-batch.js';
import { unlessAborted } from '../platform/abort.js';
import { isStopAbort, runHook } from './hooks.js';
import { jsonValueProblem } from './json-value.js';
import { LeaseKeeper } from './lease-keeper.js';
import type { HandlerTurns, Turn } from './turns.js';
import type { ResolvedWorkerOptions } from './options.js';
import { cleanupOrphans, outputDir } from './outputs.js';
import { AUTO_PREFETCH_GIVE_BACK_MS, errorMessage, generationPath, jobFolderName, resultWithOutput } from './rules.js';
import { sendEffect } from './send-effect.js';
import { failJob, finishJob, releaseJob, type Finished } from './settle.js';
import type { SendTimes } from './send-times.js';
import type { ClaimedLease, EffectInput, EffectSender, Handler, JobContext, QueueApi, SendOutcome } from './types.js';

export interface RunLeaseDeps {
  options: ResolvedWorkerOptions;
  queue: QueueApi;
  /** The worker's finishes, coalesced across its slots. */
  finishes: FinishCoalescer;
  renewals: Pick<QueueApi, 'heartbeat' | 'get'>;
  gateway: EffectSender;
  /** The worker's recent send times, shared by its leases. */
  sendTimes: SendTimes;
  emit(event: WorkerEventBody): void;
  /** Aborted when the worker is told to stop: a lease that arrives after that is released unworked. */
  stopSignal?: AbortSignal | undefined;
  /** Aborted when the grace time after a stop is over: a handler still running is abandoned, its lease released. */
  graceSignal?: AbortSignal | undefined;
  /** Asked once the handler returned: true to claim the slot's next job in the finish's request. */
  wantNext?: (() => boolean) | undefined;
  /**
   * With `prefetch` (a number above 0, or `'auto'`), the turns at the handler the run's leases
   * share: a lease waits, kept alive, for one, and gives it back as soon as its handler has
   * returned. Without: every lease runs at once.
   */
  handlerTurns?: HandlerTurns | undefined;
  /**
   * Told when the lease's handler is about to start (its turn came); what it returns is called
   * when the handler returned: the handlers' time `prefetch: 'auto'` follows.
   */
  started?: (() => () => void) | undefined;
}

/** A failure is kept as `lastError` by the queue; a bounded one always fits its limit. */
const MAX_ERROR_CHARS = 4_096;
/**
 * The largest result a finish carries: the queue's body limit less room for the rest of the
 * request (owner, token, next). A larger one would be refused (413) on every attempt, so the
 * job fails at once instead, saying why.
 */
const MAX_RESULT_BYTES = QUEUE_BODY_LIMIT_BYTES - 2_048;
/**
 * The most object keys a result may hold: the queue's limit per body less room for the finish's
 * own (`owner`, `token`, `result`, `next`...). More would be refused (400) on every attempt.
 */
export const MAX_RESULT_KEYS = MAX_JSON_KEYS - 16;
/** The deepest result a finish carries: one level less than the queue takes, for the body around it. */
export const MAX_RESULT_DEPTH = MAX_JSON_DEPTH - 1;

const NO_RESULT: ResultSize = { bytes: 0, keys: 0, depth: 0 };

type Handled = { kind: 'returned'; result: unknown } | { kind: 'threw'; error: unknown } | { kind: 'grace_over' };

export async function runLease(claimed: ClaimedLease, handler: Handler, deps: RunLeaseDeps): Promise<Finished> {
  const { options, renewals, sendTimes, emit } = deps;
  const keeper = new LeaseKeeper({ claimed, options, renewals, sendTimes, emit });
  const ended = await runToEnd(keeper, handler, deps);
  if (deps.options.outputRoot !== undefined) await cleanupAfter(deps.options.outputRoot, keeper.lease.id, deps);
  return ended;
}

async function runToEnd(keeper: LeaseKeeper, handler: Handler, deps: RunLeaseDeps): Promise<Finished> {
  const none = (outcome: Finished['outcome']): Finished => ({ outcome, next: null });
  // Stopping already: the lease came back with a claim made just before the stop. Hand it back.
  if (deps.stopSignal?.aborted) {
    await keeper.stop();
    return none(await releaseJob(keeper, deps));
  }
  keeper.start();
  const { turn, late } = await turnAtHandler(keeper, deps);
  if (turn === undefined) return none(await handBack(keeper, deps, late ? AUTO_PREFETCH_GIVE_BACK_MS : undefined));
  const ended = deps.started?.();
  const generation = new Generation(keeper, deps);
  const abandoned = () =>
    new Error(`worker "${deps.options.name}" stopped before the job was done; its lease is released`);
  let handled: Handled;
  try {
    if (keeper.renewFirst) await keeper.renew().catch(() => {});
    handled = keeper.lost
      ? { kind: 'threw', error: keeper.lost }
      : await untilGraceOver(handler, new LeaseContext(keeper, deps, generation, abandoned), deps.graceSignal);
  } finally {
    // The next lease's handler runs while this one's finish is on its way.
    turn();
    ended?.();
  }
  // Out of time after a stop, or given up to it (the handler threw the stop's own abort: a hold()
  // in a hook ended by the stop, retries ended by it): handed back now, the attempt given back.
  if (handled.kind === 'grace_over' || (handled.kind === 'threw' && isStopAbort(handled.error, deps.stopSignal))) {
    keeper.abandon(abandoned());
    return none(await handBack(keeper, deps));
  }
  // Decide only once every answer is in: a renewal in flight may still report the loss.
  await keeper.stop();
  const lease = keeper.lease;
  if (keeper.lost) return none({ status: 'lost', lease, error: keeper.lost });
  const output = generation.used ? generationPath(lease.id, lease.token) : undefined;
  const { failure, recorded } = judged(handled, output);
  if (failure !== undefined) return none(await failJob(keeper, deps, failure.slice(0, MAX_ERROR_CHARS)));
  try {
    await runHook(deps.options.hooks.beforeFinish, lease, deps, abandoned);
  } catch (err) {
    // Held there past the grace after a stop, or ended by the stop: the lease is handed back
    // unfinished (renewals have stopped already). Any other error of a hook is the run's.
    if (!deps.graceSignal?.aborted && !isStopAbort(err, deps.stopSignal)) throw err;
    keeper.abandon(abandoned());
    return none(await releaseJob(keeper, deps));
  }
  const result = handled.kind === 'returned' ? handled.result : undefined;
  const wantNext = deps.wantNext?.() ?? false;
  if (output === undefined) return finishJob(keeper, deps, result, recorded ?? NO_RESULT, wantNext);
  return finishJob(keeper, deps, resultWithOutput(result, output), recorded ?? NO_RESULT, wantNext);
}

/**
 * What a handler's end makes of the job: the failure to report (the handler threw, or returned a
 * result the queue would refuse), or the size of the result as the finish carries it (with the
 * output's path, when there is one). The result is checked to be a JSON value, then serialized
 * once, to check it is within the queue's limits; its size then places the finish in a batch.
 */
function judged(
  handled: Exclude<Handled, { kind: 'grace_over' }>,
  output: string | undefined,
): { failure?: string | undefined; recorded?: ResultSize | undefined } {
  if (handled.kind === 'threw') return { failure: errorMessage(handled.error) };
  const notJson = handled.result === undefined ? undefined : jsonValueProblem(handled.result, 'result');
  if (notJson !== undefined) return { failure: `the handler returned a result that is not JSON: ${notJson}` };
  const size = resultSize(handled.result);
  if (size === undefined) return { failure: 'the handler returned a result that JSON.stringify could not serialize' };
  // With an output, the result becomes `{"value": result, "output": "…"}`: 20 bytes, 2 keys and
  // a level more, and the path.
  const recorded: ResultSize =
    output === undefined
      ? size
      : {
          bytes: size.bytes + Buffer.byteLength(JSON.stringify(output)) + 20,
          keys: size.keys + 2,
          depth: size.depth + 1,
        };
  const failure =
    recorded.bytes > MAX_RESULT_BYTES
      ? `the handler returned a result of ${recorded.bytes} bytes as JSON; a finish carries at most ${MAX_RESULT_BYTES} (the queue takes ${QUEUE_BODY_LIMIT_BYTES} bytes per request): keep large outputs in ctx.outputDir() or elsewhere, and return where they are`
      : recorded.keys > MAX_RESULT_KEYS
        ? `the handler returned a result of ${recorded.keys} object keys; a finish carries at most ${MAX_RESULT_KEYS} (the queue takes ${MAX_JSON_KEYS} keys per request): keep large outputs in ctx.outputDir() or elsewhere, and return where they are`
        : recorded.depth > MAX_RESULT_DEPTH
          ? `the handler returned a result nested ${recorded.depth} deep; a finish carries at most ${MAX_RESULT_DEPTH} (the queue takes ${MAX_JSON_DEPTH} levels per request)`
          : undefined;
  return { failure, recorded };
}

/**
 * A lease that ends unfinished: once its keeper has stopped, lost if it was, else released
 * (`waitedMs`: handed back after waiting that long for a turn).
 */
async function handBack(keeper: LeaseKeeper, deps: RunLeaseDeps, waitedMs?: number): Promise<Finished['outcome']> {
  await keeper.stop();
  if (keeper.lost) return { status: 'lost', lease: keeper.lease, error: keeper.lost };
  return releaseJob(keeper, deps, waitedMs);
}

/**
 * The lease's turn at the handler. Without prefetch every lease has one at once. With it, a lease
 * waits, renewed meanwhile, and says when its turn comes (`turn`); lost while it waits (a renewal
 * refused) or stopped, it gets no turn, and is ended or handed back unworked. With `'auto'`, it
 * also gets none after AUTO_PREFETCH_GIVE_BACK_MS (`late`), and is handed back.
 */
async function turnAtHandler(keeper: LeaseKeeper, deps: RunLeaseDeps): Promise<{ turn?: Turn; late?: boolean }> {
  const turns = deps.handlerTurns;
  if (!turns) return { turn: () => {} };
  if (turns.hasFree) return { turn: await turns.take(deps.stopSignal, keeper.signal) };
  const { clock, timers, prefetch } = deps.options;
  const from = clock.now();
  const late = prefetch === 'auto' ? new AbortController() : undefined;
  const timer = late && timers.setTimer(() => late.abort(), AUTO_PREFETCH_GIVE_BACK_MS);
  const turn = await turns.take(deps.stopSignal, keeper.signal, late?.signal);
  timers.clearTimer(timer);
  if (turn) {
    const { id, token } = keeper.lease;
    deps.emit({ event: 'turn', job: id, token, waitedMs: Math.max(0, clock.now() - from) });
    return { turn };
  }
  return { late: late?.signal.aborted === true && !deps.stopSignal?.aborted && !keeper.lost };
}

/** The handler's end, or the end of the grace time after a stop, whichever comes first. */
function untilGraceOver(handler: Handler, ctx: JobContext, grace: AbortSignal | undefined): Promise<Handled> {
  const work = (async () => handler(ctx))().then(
    (result): Handled => ({ kind: 'returned', result }),
    (error: unknown): Handled => ({ kind: 'threw', error }),
  );
  // A handler that ignores its signal runs on; nothing it does under the released token counts.
  return unlessAborted(work, grace, (): Handled => ({ kind: 'grace_over' }));
}

/** What the handler gets: its getters on the prototype, so each job's context is one small object. */
class LeaseContext implements JobContext {
  constructor(
    private readonly keeper: LeaseKeeper,
    private readonly deps: RunLeaseDeps,
    private readonly generation: Generation,
    private readonly abandoned: () => Error,
  ) {}

  get lease(): Lease {
    return this.keeper.lease;
  }

  get signal(): AbortSignal {
    return this.keeper.signal;
  }

  get lost(): LeaseLostError | undefined {
    return this.keeper.lost;
  }

  // Arrow properties: a handler may pass `ctx.send` on without its `this`.
  readonly send = (effect?: number | EffectInput): Promise<SendOutcome> =>
    sendEffect(this.keeper, this.deps, effect, this.abandoned);
  readonly renew = (): Promise<Lease> => this.keeper.renew();
  readonly stage = (name: string): Promise<Lease> => this.keeper.renew(name);
  readonly outputDir = (): Promise<string> => this.generation.dir();
}

/** This lease's output folder, made on first use; the finish records it when it was used. */
class Generation {
  used = false;
  private made: Promise<string> | undefined;

  constructor(
    private readonly keeper: LeaseKeeper,
    private readonly deps: RunLeaseDeps,
  ) {}

  async dir(): Promise<string> {
    const root = this.deps.options.outputRoot;
    if (root === undefined) throw new Error("ctx.outputDir() needs the worker's outputRoot option.");
    const { keeper } = this;
    if (keeper.lost) throw keeper.lost;
    if (keeper.signal.aborted) throw keeper.signal.reason;
    this.used = true;
    const { id, token } = keeper.lease;
    this.made ??= outputDir(root, keeper.lease).then(
      (dir) => {
        this.deps.emit({ event: 'output', job: id, token, path: generationPath(id, token) });
        return dir;
      },
      (err: unknown) => {
        this.made = undefined;
        throw err;
      },
    );
    return this.made;
  }
}

/**
 * Once a job's outcome is known, its generations that can no longer win are removed — judged
 * from the queue's row. Only when this disk has any of the job's generations; best effort: a
 * cleanup that fails is left to the next outcome of the job, or to `cleanupOrphans`.
 */
async function cleanupAfter(root: string, jobId: string, deps: RunLeaseDeps): Promise<void> {
  try {
    await stat(join(root, jobFolderName(jobId)));
  } catch {
    return;
  }
  try {
    const { removed } = await cleanupOrphans(root, jobId, deps.queue);
    if (removed.length > 0) deps.emit({ event: 'cleaned', job: jobId, removed });
  } catch {
    // Nothing depends on it: an orphan left now is removed by a later cleanup.
  }
}

/** `value` serialized as JSON: its bytes, keys and depth (zeros for undefined: no result); undefined when it is not JSON. */
function resultSize(value: unknown): ResultSize | undefined {
  if (value === undefined) return NO_RESULT;
  let json: string;
  try {
    json = JSON.stringify(value);
  } catch {
    return undefined;
  }
  const bytes = Buffer.from(json);
  const { keys, depth } = scanJson(bytes);
  return { bytes: bytes.length, keys, depth };
}
