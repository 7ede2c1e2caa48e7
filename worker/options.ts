// The worker's options: defaults in one object, one function that checks ranges and relations;
// everything inside the worker takes only the resolved shape.
import { checkClock, timersOf, type Clock, type Timers } from '../platform/clock.js';
import { httpUrl } from '../platform/url.js';
import { checkApiKey } from '../platform/exchange.js';
import { describeValue } from '../platform/describe-value.js';
import { idProblem } from '../platform/ids.js';
import { checkRequiredOptions, type OptionNames } from '../platform/option-names.js';
import type { WorkerEvent } from './events.js';
import { heartbeatIntervalMs } from './rules.js';
import type { EffectSender, QueueApi, WorkerHooks } from './types.js';

export const WORKER_DEFAULTS = {
  leaseMs: 30_000,
  concurrency: 1,
  prefetch: 'auto',
  waitMs: 20_000,
  pollMs: 500,
  graceMs: 10_000,
} as const;

/** The shortest lease a worker accepts: below it the 100 ms heartbeat floor leaves no margin. */
export const MIN_LEASE_MS = 300;
const MAX_LEASE_MS = 7 * 24 * 60 * 60 * 1000;
/** The queue's limits on one claim: `max` up to 100 leases, `waitMs` up to 30 s. */
export const MAX_CONCURRENCY = 100;
const MAX_WAIT_MS = 30_000;

export interface WorkerOptions {
  /** The queue's base URL. */
  queueUrl: string;
  /** The gateway's base URL: every effect goes through it. */
  gatewayUrl: string;
  /** The queue's and the gateway's API key (their `--api-key`), presented on every call to either. */
  apiKey?: string | undefined;
  /** The owner name this worker claims as. */
  name: string;
  /** How long each claim asks for (default 30000, at least 300). Renewals extend by as much. */
  leaseMs?: number | undefined;
  /** How many jobs run at once, each under its own lease (default 1, at most 100). */
  concurrency?: number | undefined;
  /**
   * How many leases the worker holds beyond `concurrency`, each waiting for a handler to be free
   * (`concurrency` + `prefetch` at most 100). A waiting lease is renewed like a running one and
   * handed back unworked when the worker stops. The next job then starts while the last one's
   * finish is on its way, so the queue's commits are shared by more finishes; the cost is that
   * these jobs are held, attempt spent, by a worker that is not yet running them. The default,
   * `'auto'`, holds as many as the handlers would start in 20 ms, judged by how long they recently
   * took (rules.autoPrefetch): many for short jobs, none for long ones. 0 holds none.
   */
  prefetch?: number | 'auto' | undefined;
  /**
   * How long one claim may wait at the queue for a job (long poll; default 20000, at most
   * 30000). 0 asks and returns at once; the worker then pauses `pollMs` between empty claims.
   */
  waitMs?: number | undefined;
  /**
   * The pause before claiming again after a claim failed (queue unreachable, 5xx), or came
   * back empty without having waited (`waitMs` 0, or a queue that answered early). Default 500.
   */
  pollMs?: number | undefined;
  /**
   * After a stop, how long running handlers may still take to end by themselves; then their
   * leases are released and their signals aborted (default 10000).
   */
  graceMs?: number | undefined;
  /**
   * How long a send already on its way may take to answer after the lease is lost, before the
   * handler's signal aborts it (default: the heartbeat interval, at least 1000).
   */
  sendGraceMs?: number | undefined;
  /**
   * Where `ctx.outputDir()` puts each generation's files: `<outputRoot>/<job>/<token>/`. When
   * set, a finish records the generation that won in the job's result (`output`), and the
   * worker removes generations that can no longer win once a job's outcome is known.
   */
  outputRoot?: string | undefined;
  onEvent?: ((event: WorkerEvent) => void) | undefined;
  hooks?: WorkerHooks | undefined;
  /**
   * The worker's clock, for its estimate of the lease's end; never decides validity. A clock
   * that runs timers (the test kit's manual clock) also times the renewals and the loss of a
   * lease, so a test that moves it moves them.
   */
  clock?: Clock | undefined;
  /** Replace the HTTP clients (tests put faults between the worker and a service). */
  queue?: QueueApi | undefined;
  gateway?: EffectSender | undefined;
}

export interface ResolvedWorkerOptions {
  queueUrl: URL;
  gatewayUrl: URL;
  apiKey: string | undefined;
  name: string;
  leaseMs: number;
  concurrency: number;
  /** A fixed number of leases held beyond `concurrency`, or `'auto'` (rules.autoPrefetch). */
  prefetch: number | 'auto';
  waitMs: number;
  /** Timer renewals: every `max(100, floor(leaseMs / 3))` ms. */
  heartbeatMs: number;
  /** Pause between attempts after a renewal, finish, fail or release failed to reach the queue. */
  retryMs: number;
  pollMs: number;
  graceMs: number;
  sendGraceMs: number;
  outputRoot: string | undefined;
  onEvent: (event: WorkerEvent) => void;
  hooks: WorkerHooks;
  clock: Clock;
  /** The clock's own timers when it has them (timersOf), for renewals and the loss of a lease. */
  timers: Timers;
  queue: QueueApi | undefined;
  gateway: EffectSender | undefined;
}

/** Every name WorkerOptions has: anything else is refused, a misspelt option above all. */
export const WORKER_OPTION_NAMES: OptionNames<WorkerOptions> = {
  queueUrl: true,
  gatewayUrl: true,
  apiKey: true,
  name: true,
  leaseMs: true,
  concurrency: true,
  prefetch: true,
  waitMs: true,
  pollMs: true,
  graceMs: true,
  sendGraceMs: true,
  outputRoot: true,
  onEvent: true,
  hooks: true,
  clock: true,
  queue: true,
  gateway: true,
};

/** `what`: the call the options were given to, as an error names it. */
export function resolveWorkerOptions(options: WorkerOptions, what = 'createWorker'): ResolvedWorkerOptions {
  checkRequiredOptions(what, options, WORKER_OPTION_NAMES);
  const name = options.name;
  if (typeof name !== 'string' || name.length === 0 || name.length > 256) {
    throw new RangeError(`name must be a non-empty string of at most 256 characters, not ${JSON.stringify(name)}.`);
  }
  // The rest of the queue's rule for an owner, so a name it would refuse stops the worker at
  // start, not at its first claim.
  const nameProblem = idProblem(name, 'name');
  if (nameProblem !== undefined) throw new RangeError(`${nameProblem}, not ${JSON.stringify(name)}.`);
  const leaseMs = intIn('leaseMs', options.leaseMs ?? WORKER_DEFAULTS.leaseMs, MIN_LEASE_MS, MAX_LEASE_MS);
  const heartbeatMs = heartbeatIntervalMs(leaseMs);
  const outputRoot = options.outputRoot;
  if (outputRoot !== undefined && (typeof outputRoot !== 'string' || outputRoot.length === 0)) {
    throw new RangeError(`outputRoot must be a folder path, not ${JSON.stringify(outputRoot)}.`);
  }
  const clock = checkClock(options.clock);
  const concurrency = intIn('concurrency', options.concurrency ?? WORKER_DEFAULTS.concurrency, 1, MAX_CONCURRENCY);
  // One claim asks for every free slot, and the queue gives at most 100 leases per claim.
  const prefetch = prefetchIn(options.prefetch ?? WORKER_DEFAULTS.prefetch, MAX_CONCURRENCY - concurrency);
  return {
    queueUrl: httpUrl('queueUrl', options.queueUrl),
    gatewayUrl: httpUrl('gatewayUrl', options.gatewayUrl),
    apiKey: options.apiKey === undefined ? undefined : checkApiKey(options.apiKey),
    name,
    leaseMs,
    concurrency,
    prefetch,
    waitMs: intIn('waitMs', options.waitMs ?? WORKER_DEFAULTS.waitMs, 0, MAX_WAIT_MS),
    heartbeatMs,
    retryMs: Math.max(25, Math.floor(heartbeatMs / 4)),
    pollMs: intIn('pollMs', options.pollMs ?? WORKER_DEFAULTS.pollMs, 10, 3_600_000),
    graceMs: intIn('graceMs', options.graceMs ?? WORKER_DEFAULTS.graceMs, 0, MAX_LEASE_MS),
    sendGraceMs: intIn('sendGraceMs', options.sendGraceMs ?? Math.max(heartbeatMs, 1_000), 0, MAX_LEASE_MS),
    outputRoot,
    onEvent: functionOrNone('onEvent', options.onEvent) ?? (() => {}),
    hooks: checkHooks(options.hooks ?? {}),
    clock,
    timers: timersOf(clock),
    queue: options.queue,
    gateway: options.gateway,
  };
}

/** `value` when it is a function or undefined; a TypeError naming `what` otherwise. */
export function functionOrNone<T>(what: string, value: T | undefined): T | undefined {
  if (value !== undefined && typeof value !== 'function') {
    throw new TypeError(`${what} must be a function, not ${describeValue(value)}.`);
  }
  return value;
}

const HOOKS: ReadonlyArray<keyof WorkerHooks> = ['beforeSend', 'beforeFinish'];

/** A hook that is not a function would throw at the worst place: after the last look at the lease. */
function checkHooks(hooks: WorkerHooks): WorkerHooks {
  if (typeof hooks !== 'object' || hooks === null) {
    throw new TypeError(`hooks must be an object of ${HOOKS.join(' and ')}, not ${describeValue(hooks)}.`);
  }
  for (const name of HOOKS) functionOrNone(`hooks.${name}`, hooks[name]);
  return hooks;
}

/** `'auto'`, or a number of leases from 0 to `max` (what `concurrency` leaves of a claim's 100). */
function prefetchIn(value: unknown, max: number): number | 'auto' {
  if (value === 'auto') return value;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0 || value > max) {
    const Refusal = typeof value === 'number' ? RangeError : TypeError;
    throw new Refusal(`prefetch must be 'auto' or an integer from 0 to ${max}, not ${describeValue(value)}.`);
  }
  return value;
}

/** A whole number from `min` to `max`: a RangeError past them, a TypeError for a value that is no number (`''`, `'500'`). */
function intIn(what: string, value: unknown, min: number, max: number): number {
  if (typeof value !== 'number') {
    throw new TypeError(`${what} must be an integer from ${min} to ${max}, not ${describeValue(value)}.`);
  }
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new RangeError(`${what} must be an integer from ${min} to ${max}, not ${describeValue(value)}.`);
  }
  return value;
}
