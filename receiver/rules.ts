// The receiver's effect rules as one pure function: given what a job already has and a new
// request, decide the outcome and the job's next state. No I/O, no clock — `now` is passed in.
import { canonicalJson } from '../platform/effect-fields.js';

/**
 * One external effect of a job, identified by `(jobId, key)`; `token` is the fencing token it was
 * applied with. `key` is absent for the job's default effect, `qty` and `body` when not given.
 */
export interface Effect {
  jobId: string;
  key?: string;
  qty?: number;
  /** Any JSON value, in its canonical form (object keys sorted). */
  body?: unknown;
  token: number;
  appliedAt: number;
}

/**
 * What a request is judged against: the effect recorded for its `(jobId, key)`, if any, and the
 * highest token the job has accepted by any of its effects (the fence is per job).
 */
export interface JobState {
  effect?: Effect;
  highestToken: number;
}

/** One `POST /effects` request, already validated: `qty`, `body` or both are given. */
export interface EffectRequest {
  jobId: string;
  key?: string;
  qty?: number;
  /** Canonical (object keys sorted) once it has passed the app's parsing. */
  body?: unknown;
  token: number;
}

export type Outcome = 'applied' | 'duplicate' | 'fenced' | 'conflict';

export interface Judgement {
  outcome: Outcome;
  /**
   * The state after the request: the effect of the request's `(jobId, key)` and the job's
   * highest token; new for `applied`, unchanged for `fenced`/`conflict`.
   */
  state: JobState;
  /** True when `state` differs from what was stored, so the store must write it. */
  changed: boolean;
}

export { systemClock, type Clock } from '../platform/clock.js';

/** The effect a first request records: its fields as given, its token, at `now`. */
export function effectOf(request: EffectRequest, now: number): Effect {
  return {
    jobId: request.jobId,
    ...(request.key === undefined ? {} : { key: request.key }),
    ...(request.qty === undefined ? {} : { qty: request.qty }),
    ...(request.body === undefined ? {} : { body: request.body }),
    token: request.token,
    appliedAt: now,
  };
}

/** Which of the recorded effect's fields a repeat asks to change: none means it is the same effect. */
export function differences(effect: Effect, request: EffectRequest): Array<'qty' | 'body'> {
  const changed: Array<'qty' | 'body'> = [];
  if (effect.qty !== request.qty) changed.push('qty');
  if (!sameBody(effect.body, request.body)) changed.push('body');
  return changed;
}

/** Equal as JSON, object key order ignored; a body left out equals only a body left out. */
export function sameBody(a: unknown, b: unknown): boolean {
  if (a === undefined || b === undefined) return a === b;
  return canonicalJson(a) === canonicalJson(b);
}

/**
 * Judges one request against its effect's stored state.
 *
 * Order matters and follows the contract: a lower token than the job's highest is fenced before
 * anything else is compared, whatever the key, so a stale worker learns it lost the job rather
 * than that it sent the wrong qty or body. An equal token is a retransmission. Only `applied` and
 * `duplicate` may raise the job's highest token.
 */
export function judge(state: JobState | undefined, request: EffectRequest, now: number): Judgement {
  if (state !== undefined && request.token < state.highestToken) {
    return { outcome: 'fenced', state, changed: false };
  }
  if (state?.effect === undefined) {
    return {
      outcome: 'applied',
      state: { effect: effectOf(request, now), highestToken: request.token },
      changed: true,
    };
  }
  if (differences(state.effect, request).length > 0) {
    return { outcome: 'conflict', state, changed: false };
  }
  if (request.token > state.highestToken) {
    return { outcome: 'duplicate', state: { effect: state.effect, highestToken: request.token }, changed: true };
  }
  return { outcome: 'duplicate', state, changed: false };
}
