// The worker: its options, its HTTP clients on kept-alive connections, one job at a time for
// custom loops (`claim`, `process`), and `run`, which keeps up to `concurrency` jobs going
// (slots.ts) until it is stopped.
import { GatewayClient } from '../gateway/client.js';
import { describeValue } from '../platform/describe-value.js';
import { QueueClient } from '../queue/client.js';
import { FreshAgent } from './connections.js';
import type { WorkerEventBody } from './events.js';
import { FinishCoalescer } from './finish-batch.js';
import { checkOptionNames, checkRequiredOptions, type OptionNames } from '../platform/option-names.js';
import {
  resolveWorkerOptions,
  WORKER_OPTION_NAMES,
  type ResolvedWorkerOptions,
  type WorkerOptions,
} from './options.js';
import { claimedEvent } from './rules.js';
import { runLease } from './run-lease.js';
import { SendCoalescer } from './send-batch.js';
import { SendTimes } from './send-times.js';
import { WorkerRun, type LeaseDeps, type RunOptions, type WorkerSummary } from './slots.js';
import type { ClaimedLease, EffectSender, Handler, JobOutcome, QueueApi } from './types.js';

export type { RunOptions, WorkerSummary };

export class Worker {
  readonly name: string;
  readonly options: ResolvedWorkerOptions;
  private readonly queue: QueueApi;
  private readonly renewals: Pick<QueueApi, 'heartbeat' | 'get'>;
  private readonly gateway: EffectSender;
  private readonly agent: FreshAgent;
  private readonly sendTimes = new SendTimes();
  /** Every slot's finishes, in as few requests as the queue's answers allow (finish-batch.ts). */
  private readonly finishes: FinishCoalescer;
  /** Aborted by close(): stops every run still going, as its own signal would. */
  private readonly closing = new AbortController();
  /** The runs and the jobs of process() going now, which close() waits for. */
  private readonly runs = new Set<Promise<unknown>>();

  constructor(options: WorkerOptions) {
    this.options = resolveWorkerOptions(options, madeBy ?? 'new Worker');
    this.name = this.options.name;
    // Kept-alive connections, never reused after an idle spell (a pause included) that the
    // server's keep-alive timeout might have ended: see connections.ts.
    this.agent = new FreshAgent({ maxSockets: Math.max(16, this.options.concurrency * 2 + 2) });
    const queueUrl = this.options.queueUrl.href;
    const { apiKey } = this.options;
    this.queue = this.options.queue ?? new QueueClient(queueUrl, { agent: this.agent, apiKey });
    // A renewal that hangs is given up after one interval, so the next attempt starts in time.
    this.renewals =
      this.options.queue ??
      new QueueClient(queueUrl, { agent: this.agent, timeoutMs: this.options.heartbeatMs, apiKey });
    // Every slot's sends, in as few requests as the gateway's answers allow (send-batch.ts).
    this.gateway = new SendCoalescer(
      this.options.gateway ?? new GatewayClient(this.options.gatewayUrl.href, { agent: this.agent, apiKey }),
    );
    this.finishes = new FinishCoalescer(this.queue, this.options.leaseMs);
  }

  /** Claims the next job, or returns null when nothing is claimable (no waiting). */
  async claim(): Promise<ClaimedLease | null> {
    // A claim after close() would take a lease, and spend a token, that nothing will run.
    if (this.closing.signal.aborted) throw this.closedError('claim');
    const claimedAt = this.options.clock.now();
    const lease = await this.queue.claim(this.name, this.options.leaseMs);
    if (!lease) return null;
    this.emit(claimedEvent(lease));
    return { lease, claimedAt };
  }

  /**
   * Runs one claimed job to its outcome: finished, failed, lost — or released, when
   * `stopSignal` aborts (or close() is called) and the handler is still running `graceMs` later,
   * or ends sooner by throwing the stop's reason (or an AbortError it caused).
   */
  async process(
    claimed: ClaimedLease,
    handler: Handler,
    options: { stopSignal?: AbortSignal | undefined } = {},
  ): Promise<JobOutcome> {
    if (typeof handler !== 'function') throw handlerProblem(handler);
    const problem = claimedProblem(claimed);
    if (problem) throw problem;
    checkOptionNames('process', options, { stopSignal: true });
    const stop = options.stopSignal ? AbortSignal.any([options.stopSignal, this.closing.signal]) : this.closing.signal;
    const grace = graceAfter(stop, this.options.graceMs);
    const running = runLease(claimed, handler, { ...this.leaseDeps(), stopSignal: stop, graceSignal: grace.signal });
    this.runs.add(running);
    try {
      return (await running).outcome;
    } finally {
      this.runs.delete(running);
      grace.dispose();
    }
  }

  /** Claims and runs jobs, up to `concurrency` at once, until `signal` aborts or `maxJobs` have been claimed. */
  run(handler: Handler, options: RunOptions = {}): Promise<WorkerSummary> {
    // Refused before any claim: a handler that is not a function would fail every job it took.
    const problem = runProblem(handler, options);
    if (problem) return Promise.reject(problem);
    if (this.closing.signal.aborted) return Promise.reject(this.closedError('run'));
    const signal = options.signal ? AbortSignal.any([options.signal, this.closing.signal]) : this.closing.signal;
    const running = new WorkerRun(
      { options: this.options, queue: this.queue, lease: this.leaseDeps(), emit: (event) => this.emit(event) },
      handler,
      { ...options, signal },
    ).run();
    this.runs.add(running);
    const forget = () => void this.runs.delete(running);
    running.then(forget, forget);
    return running;
  }

  /**
   * Stops the runs still going as their own signal would (no new claims; running jobs get
   * `graceMs`, then are released), and the jobs of process() as their `stopSignal` would, waits
   * for them, and releases the HTTP connections. claim() and run() are refused from then on; a
   * lease claimed before is still taken by process(), which releases it at once.
   */
  async close(): Promise<void> {
    this.closing.abort();
    await Promise.allSettled(this.runs);
    this.agent.destroy();
  }

  private closedError(method: string): Error {
    return new Error(`worker.${method}: the worker is closed; create another to claim and run jobs.`);
  }

  /** What each lease's run needs from the worker. */
  private leaseDeps(): LeaseDeps {
    return {
      options: this.options,
      queue: this.queue,
      finishes: this.finishes,
      renewals: this.renewals,
      gateway: this.gateway,
      sendTimes: this.sendTimes,
      emit: (event: WorkerEventBody) => this.emit(event),
    };
  }

  private emit(body: WorkerEventBody): void {
    this.options.onEvent({ t: this.options.clock.now(), worker: this.name, ...body });
  }
}

/** A signal that aborts `graceMs` after `stop` does. */
function handlerProblem(handler: unknown): TypeError {
  return new TypeError(`The handler must be a function (ctx) => result, not ${describeValue(handler)}.`);
}

/** What is wrong with what `process()` was given to run, if anything: it must be what claim() answered. */
function claimedProblem(claimed: unknown): TypeError | undefined {
  const { lease, claimedAt } = (claimed ?? {}) as Partial<ClaimedLease>;
  const fine =
    typeof lease === 'object' &&
    lease !== null &&
    typeof lease.id === 'string' &&
    typeof lease.owner === 'string' &&
    Number.isSafeInteger(lease.token) &&
    Number.isSafeInteger(lease.qty) &&
    Number.isFinite(lease.leaseUntil) &&
    Number.isFinite(claimedAt);
  if (fine) return undefined;
  const none = claimed === null ? ' (claim() answers null when no job is claimable)' : '';
  return new TypeError(`process takes a claimed lease, as claim() answers it, not ${describeValue(claimed)}${none}.`);
}

/** What is wrong with `run()`'s arguments, if anything. */
function runProblem(handler: unknown, options: RunOptions): Error | undefined {
  if (typeof handler !== 'function') return handlerProblem(handler);
  if (typeof options !== 'object' || options === null) {
    return new TypeError(`run's options must be an object ({signal?, maxJobs?}), not ${describeValue(options)}.`);
  }
  try {
    checkOptionNames('run', options, RUN_OPTION_NAMES);
  } catch (err) {
    return err as Error;
  }
  const { signal, maxJobs } = options;
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    return new TypeError(`signal must be an AbortSignal, not ${describeValue(signal)}.`);
  }
  if (maxJobs !== undefined && (!Number.isSafeInteger(maxJobs) || maxJobs < 0)) {
    return new RangeError(`maxJobs must be a whole number of jobs, 0 or more, not ${describeValue(maxJobs)}.`);
  }
  return undefined;
}

function graceAfter(stop: AbortSignal, graceMs: number): { signal: AbortSignal; dispose(): void } {
  const grace = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const onStop = () => {
    timer = setTimeout(() => grace.abort(), graceMs);
  };
  if (stop.aborted) onStop();
  else stop.addEventListener('abort', onStop, { once: true });
  return {
    signal: grace.signal,
    dispose: () => {
      clearTimeout(timer);
      stop.removeEventListener('abort', onStop);
    },
  };
}

/** The call making a worker now, when it is not `new Worker` itself: see workerMadeBy. */
let madeBy: string | undefined;

/**
 * A worker made by `what` (createWorker, runWorker, the test kit's `system.worker`), so that an
 * error in its options names the call the user made. The constructor runs synchronously, so
 * nothing else can make a worker while `madeBy` is set.
 */
export function workerMadeBy(what: string, options: WorkerOptions): Worker {
  madeBy = what;
  try {
    return new Worker(options);
  } finally {
    madeBy = undefined;
  }
}

export function createWorker(options: WorkerOptions): Worker {
  return workerMadeBy('createWorker', options);
}

export interface RunWorkerOptions extends WorkerOptions, RunOptions {
  handler: Handler;
}

const RUN_OPTION_NAMES: OptionNames<RunOptions> = { signal: true, maxJobs: true };
const RUN_WORKER_OPTION_NAMES: OptionNames<RunWorkerOptions> = {
  ...WORKER_OPTION_NAMES,
  ...RUN_OPTION_NAMES,
  handler: true,
};

/** Runs a worker until `signal` aborts (or `maxJobs`), then closes it. */
export async function runWorker(options: RunWorkerOptions): Promise<WorkerSummary> {
  checkRequiredOptions('runWorker', options, RUN_WORKER_OPTION_NAMES);
  const { handler, signal, maxJobs, ...workerOptions } = options;
  const worker = workerMadeBy('runWorker', workerOptions);
  try {
    return await worker.run(handler, { signal, maxJobs });
  } finally {
    await worker.close();
  }
}
