// The receiver's effect rules as one pure function: given what a job already has and a new
// request, decide the outcome and the job's next state. No I/O, no clock — `now` is passed in.

/** The one external effect a job may cause; `token` is the fencing token it was applied with. */
export interface Effect {
  jobId: string;
  qty: number;
  token: number;
  appliedAt: number;
}

/** What the receiver keeps per job: the applied effect and the highest token seen since. */
export interface JobState {
  effect: Effect;
  highestToken: number;
}

/** One `POST /effects` request, already validated. */
export interface EffectRequest {
  jobId: string;
  qty: number;
  token: number;
}

export type Outcome = 'applied' | 'duplicate' | 'fenced' | 'conflict';

export interface Judgement {
  outcome: Outcome;
  /** The job's state after the request: new for `applied`, unchanged for `fenced`/`conflict`. */
  state: JobState;
  /** True when `state` differs from what was stored, so the store must write it. */
  changed: boolean;
}

export { systemClock, type Clock } from '../platform/clock.js';

/**
 * Judges one request against a job's stored state.
 *
 * Order matters and follows the contract: a lower token is fenced before its qty is compared,
 * so a stale worker learns it lost the job rather than that it sent the wrong qty. An equal
 * token is a retransmission. Only `applied` and `duplicate` may raise the highest token.
 */
export function judge(state: JobState | undefined, request: EffectRequest, now: number): Judgement {
  if (state === undefined) {
    const effect: Effect = { jobId: request.jobId, qty: request.qty, token: request.token, appliedAt: now };
    return { outcome: 'applied', state: { effect, highestToken: request.token }, changed: true };
  }
  if (request.token < state.highestToken) {
    return { outcome: 'fenced', state, changed: false };
  }
  if (request.qty !== state.effect.qty) {
    return { outcome: 'conflict', state, changed: false };
  }
  if (request.token > state.highestToken) {
    return { outcome: 'duplicate', state: { effect: state.effect, highestToken: request.token }, changed: true };
  }
  return { outcome: 'duplicate', state, changed: false };
}
