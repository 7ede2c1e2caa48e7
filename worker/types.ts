// The worker's vocabulary: what a handler receives and returns, how a job ends, and the two
// services it talks to, as narrow interfaces so tests can put a fault between them.
import type { SendOutcome, SendRequest } from '../gateway/types.js';
import type { QueueClient } from '../queue/client.js';
import type { Job, Lease } from '../queue/types.js';
import type { LeaseLostError } from './errors.js';

/**
 * The queue calls a worker makes; QueueClient has them. `finishMany` may be left out of a
 * replacement: the worker then sends each finish on its own.
 */
export type QueueApi = Pick<
  QueueClient,
  'claim' | 'claimMany' | 'heartbeat' | 'finish' | 'finishAndClaim' | 'fail' | 'release' | 'get'
> &
  Partial<Pick<QueueClient, 'finishMany'>>;

/**
 * The gateway calls a worker makes; GatewayClient has them. `sendMany` may be left out of a
 * replacement: the worker then sends each effect on its own.
 */
export interface EffectSender {
  send(input: SendRequest, options?: { signal?: AbortSignal }): Promise<SendOutcome>;
  /** Several sends in one request, each answered its outcome or the error `send` would have thrown. */
  sendMany?(sends: readonly SendRequest[], options?: { signal?: AbortSignal }): Promise<Array<SendOutcome | Error>>;
}

export type { SendOutcome };

/** One effect a handler sends: `ctx.send({to?, key?, qty?, body?})`. */
export interface EffectInput {
  /** The downstream's name, as the gateway was started with it (default `receiver`). */
  to?: string | undefined;
  /** The effect's key within the job, 1–128 characters; left out, the job's default effect. */
  key?: string | undefined;
  /** An integer >= 1; the default effect's defaults to the job's qty. */
  qty?: number | undefined;
  /**
   * Any JSON value (at most 64 KiB serialized), recorded with the effect: null, a boolean, a
   * finite number, a string, or arrays and plain objects of them (a property set to undefined is
   * left out). Anything JSON would change (a function, NaN, a Date, a Map...) is refused.
   */
  body?: unknown;
}

/** A lease together with the worker's local time when it asked for it (the base of its estimate). */
export interface ClaimedLease {
  lease: Lease;
  claimedAt: number;
  /**
   * When the answer arrived, for a claim that may have waited at the queue (long poll). A wait
   * of a heartbeat interval or more makes the worker renew before the handler starts.
   */
  answeredAt?: number | undefined;
}

/** What a handler gets for one job. */
export interface JobContext {
  /** The lease as last renewed (`leaseUntil` moves forward). */
  readonly lease: Lease;
  /**
   * Aborted when the lease is lost (a cancelled job included), or when the worker stopped and
   * the grace time is over (the lease is then released). Pass it to anything slow the handler
   * awaits; `send` already uses it.
   */
  readonly signal: AbortSignal;
  /** Set as soon as the worker knows the lease is lost, even before `signal` aborts. */
  readonly lost: LeaseLostError | undefined;
  /**
   * Sends one effect through the gateway under this lease's owner and token, checked against
   * the lease first. A number (or nothing) is the job's default effect with that qty (default:
   * the job's); an object names any effect: `to` a downstream (default `receiver`), `key` the
   * effect within the job (left out: the default effect, whose qty defaults to the job's),
   * `qty` and `body`. A handler may send several effects; each is fenced by this lease. Throws
   * LeaseLostError when the lease is lost or the gateway refuses it as stale; GatewayError for
   * anything else; before anything is sent, a RangeError for a field of another name and a
   * TypeError for an argument that is neither a number nor an object, or a `body` that is not a
   * JSON value (the message says where in it).
   */
  send(effect?: number | EffectInput): Promise<SendOutcome>;
  /** Renews the lease now; throws LeaseLostError when that is refused or cannot succeed in time. */
  renew(): Promise<Lease>;
  /** Marks the start of a stage of the work: renews first, so each stage starts on a fresh lease. */
  stage(name: string): Promise<Lease>;
  /**
   * This lease's own folder, `<outputRoot>/<job>/<token>/`, created on first use (needs the
   * worker's `outputRoot`). Two holders of one job never share it; the finish records it as
   * the job's `output`. Throws LeaseLostError once the lease is lost.
   */
  outputDir(): Promise<string>;
}

/** A job's work. Its return value is the job's `result` (JSON). Throwing fails the job. */
export type Handler = (ctx: JobContext) => unknown;

export type JobOutcome =
  /** The queue accepted the finish: the job is `done`. */
  | { status: 'finished'; lease: Lease; job: Job; result: unknown }
  /** The handler threw and the queue accepted the fail: `pending` again, or `dead`. */
  | { status: 'failed'; lease: Lease; job: Job; error: string }
  /**
   * The worker stopped and the handler outlived the grace time: the lease was handed back
   * (`job` is the queue's answer; null when the release did not get through, and the lease then
   * simply runs out).
   */
  | { status: 'released'; lease: Lease; job: Job | null }
  /** The lease was lost: nothing was finished or failed under it. */
  | { status: 'lost'; lease: Lease; error: LeaseLostError };

/**
 * Fault injection, for tests and the demo: pauses placed where a stall does the most harm,
 * after the worker's last look at its lease and before it acts on it.
 */
export interface WorkerHooks {
  /** Inside `send`, after the lease was checked, before the request leaves. */
  beforeSend?: ((lease: Lease, options: HookOptions) => Promise<void> | void) | undefined;
  /** After the handler returned and renewals stopped, before the finish. */
  beforeFinish?: ((lease: Lease, options: HookOptions) => Promise<void> | void) | undefined;
}

/** What a hook is called with besides the lease. */
export interface HookOptions {
  /**
   * Aborted when the worker is told to stop (its run's signal, `close()`, `process()`'s
   * `stopSignal`). A hook that waits should then end, throwing the signal's reason: the send or
   * the finish is not made, and the lease is released at once. A hook that waits on regardless
   * is given up when the grace after the stop is over, and the lease is released then.
   */
  signal: AbortSignal;
}
