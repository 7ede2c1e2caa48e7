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
  | { event: 'started'; leaseMs: number; heartbeatMs: number; pollMs: number }
  | ({ event: 'claimed'; attempt: number; qty: number; leaseUntil: number } & JobRef)
  | ({ event: 'renewed'; leaseUntil: number; stage?: string } & JobRef)
  | ({ event: 'call_failed'; op: 'renew' | 'finish' | 'fail'; error: string } & JobRef)
  | ({ event: 'sent'; qty: number; outcome: 'applied' | 'duplicate'; effectToken: number } & JobRef)
  | ({ event: 'send_failed'; code: string; error: string } & JobRef)
  | ({
      event: 'refused';
      op: 'renew' | 'send' | 'finish' | 'fail';
      status: number;
      code: string;
      reason?: string;
      current?: CurrentLease;
      error: string;
    } & JobRef)
  | ({ event: 'finished' } & JobRef)
  | ({ event: 'failed'; error: string; status: JobStatus; runAt: number } & JobRef)
  | ({ event: 'lost'; during: LossDuring; reason: LossReason; current?: CurrentLease; error: string } & JobRef)
  | { event: 'claim_failed'; error: string }
  | { event: 'stopping' }
  | { event: 'stopped'; claimed: number; finished: number; failed: number; lost: number };

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

/** Every line `leasehold worker` prints on stdout. */
export type WorkerLine = WorkerEvent | StalledEvent;
