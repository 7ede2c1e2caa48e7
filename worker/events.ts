// The worker's timeline: one event per step, each stamped with the worker's clock and name.
// The CLI prints them as JSON lines; the demo builds its timeline from them.
import type { CurrentLease, JobStatus } from '../queue/types.js';
import type { LossDuring, LossReason } from './errors.js';

interface JobRef {
  /** The job's id. */
  job: string;
  /** The token this worker holds (or held) for it. */
  token: number;
}

export type WorkerEventBody =
  | {
      event: 'started';
      leaseMs: number;
      heartbeatMs: number;
      pollMs: number;
      concurrency: number;
      /** A fixed number, or 'auto' (rules.autoPrefetch). */
      prefetch: number | 'auto';
      waitMs: number;
      graceMs: number;
    }
  /** With `prefetch`: a lease that waited for a handler to be free gets its turn after `waitedMs`. */
  | ({ event: 'turn'; waitedMs: number } & JobRef)
  /** `via: 'finish'`: claimed in the same request that finished the slot's previous job. */
  | ({ event: 'claimed'; attempt: number; qty: number; leaseUntil: number; via?: 'finish' } & JobRef)
  | ({ event: 'renewed'; leaseUntil: number; stage?: string } & JobRef)
  | ({ event: 'call_failed'; op: 'renew' | 'finish' | 'fail' | 'release'; error: string } & JobRef)
  /** `to` and `key` when the effect named them; `qty` when it had one. */
  | ({
      event: 'sent';
      to?: string;
      key?: string;
      qty?: number;
      outcome: 'applied' | 'duplicate';
      effectToken: number;
    } & JobRef)
  | ({ event: 'send_failed'; code: string; error: string } & JobRef)
  | ({
      event: 'refused';
      op: 'renew' | 'send' | 'finish' | 'fail' | 'release';
      status: number;
      code: string;
      reason?: string;
      current?: CurrentLease;
      error: string;
    } & JobRef)
  | ({ event: 'finished' } & JobRef)
  | ({ event: 'failed'; error: string; status: JobStatus; runAt: number } & JobRef)
  | ({ event: 'lost'; during: LossDuring; reason: LossReason; current?: CurrentLease; error: string } & JobRef)
  /** The worker stopped and the grace time ran out: the lease was handed back to the queue. */
  /** `waitedMs`: a lease held ahead (`prefetch: 'auto'`) handed back after waiting that long for a turn. */
  | ({ event: 'released'; waitedMs?: number } & JobRef)
  /** This lease's output folder was created (`path` is relative to the output root). */
  | ({ event: 'output'; path: string } & JobRef)
  /** Generations of the job that can no longer win were removed (`removed`: their tokens). */
  | { event: 'cleaned'; job: string; removed: number[] }
  | { event: 'claim_failed'; error: string }
  /** No new claims from now on; `running` handlers have `graceMs` to end by themselves. */
  | { event: 'stopping'; running: number; graceMs: number }
  /** The grace time ran out with `running` handlers still at work: their leases are released. */
  | { event: 'grace_over'; running: number }
  | {
      event: 'stopped';
      claimed: number;
      finished: number;
      failed: number;
      lost: number;
      released: number;
    };

export type WorkerEvent = { t: number; worker: string } & WorkerEventBody;

export type WorkerEventName = WorkerEvent['event'];

/** The extra line the worker CLI prints when an injected stall begins (`--stall-before-*`). */
export interface StalledEvent {
  t: number;
  worker: string;
  event: 'stalled';
  job: string;
  token: number;
  before: 'send' | 'finish';
  ms: number;
}

/** The line the worker CLI prints when a second SIGTERM/SIGINT makes it exit at once. */
export interface ExitingEvent {
  t: number;
  worker: string;
  event: 'exiting';
  signal: string;
  /** Handlers that were still running. */
  running: number;
}

/** Every line `leasehold worker` prints on stdout. */
export type WorkerLine = WorkerEvent | StalledEvent | ExitingEvent;
