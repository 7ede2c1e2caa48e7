// The gateway's forwarding rules as pure functions: whether a verified lease may carry the send,
// what an attempt's result means, how long to wait before the next one, whether the retry budget
// allows it, and how to say what went wrong. No I/O and no clock: `now` and `random` are passed in.
import type { Lease } from '../queue/types.js';
import { GatewayError } from './errors.js';
import type { Exchange } from '../platform/exchange.js';
import { DEFAULT_DOWNSTREAM } from './types.js';

export interface RetryPolicy {
  /** Attempts in all, the first included (1 = never retry). */
  attempts: number;
  /** Every attempt must start, and is cut off, within this long after the send began. */
  budgetMs: number;
  /** How long one attempt may wait for the receiver's answer. */
  receiverTimeoutMs: number;
  backoffBaseMs: number;
  backoffMaxMs: number;
}

/**
 * The refusal of a send of the job's default effect (no `key`) whose qty is not the job's, or
 * undefined when they agree. The job's qty is the effect the queue knows for it, so another qty
 * is a worker's bug or a stale copy of the job. Left to the receiver, the first such send would
 * be applied: it can only compare a qty with an effect it has already recorded. A keyed effect's
 * qty and body are the worker's to choose, so they are not checked here.
 */
export function qtyMismatchOf(
  send: { jobId: string; key?: string | undefined; qty?: number | undefined },
  lease: Pick<Lease, 'qty'>,
): GatewayError | undefined {
  if (send.key !== undefined || send.qty === lease.qty) return undefined;
  if (send.qty === undefined) {
    return new GatewayError(
      'qty_mismatch',
      `The send has no qty, but job "${send.jobId}"'s default effect carries the job's qty (${lease.qty}); nothing was forwarded. Send qty ${lease.qty}, or name another effect with key.`,
      { jobId: send.jobId, jobQty: lease.qty },
    );
  }
  return new GatewayError(
    'qty_mismatch',
    `The send's qty (${send.qty}) is not job "${send.jobId}"'s qty (${lease.qty}); nothing was forwarded. Send the job's qty.`,
    { jobId: send.jobId, qty: send.qty, jobQty: lease.qty },
  );
}

/**
 * - `done`: the downstream applied the effect (201 applied) or recognised a duplicate (200 duplicate).
 * - `judged`: the downstream decided against it (409 fenced, 422 conflict) — passed through as is.
 * - `rejected`: the downstream refused the request itself (400, 401, 413, 415) — retrying cannot help.
 * - `bad`: an answer no fenced downstream gives (another status, a success without its outcome
 *   and effect, a 409 that is not `fenced`...): never taken for an outcome, never retried.
 * - `retry`: timeout, reset, refused, other network failure, or a 5xx — the downstream is idempotent.
 * - `aborted`: the caller gave up.
 */
export type AttemptClass = 'done' | 'judged' | 'rejected' | 'bad' | 'retry' | 'aborted';

/** The protocol's refusals of a request itself, each with an error body. */
const REFUSALS: ReadonlySet<number> = new Set([400, 401, 413, 415]);

export function classifyAttempt(result: Exchange): AttemptClass {
  if (result.kind === 'aborted') return 'aborted';
  if (result.kind !== 'response') return 'retry';
  const { status, body } = result;
  if (status >= 500) return 'retry';
  if (status === 201) return outcomeOf(body) === 'applied' && hasEffect(body) ? 'done' : 'bad';
  if (status === 200) return outcomeOf(body) === 'duplicate' && hasEffect(body) ? 'done' : 'bad';
  const code = errorCodeOf(body);
  if ((status === 409 && code === 'fenced') || (status === 422 && code === 'conflict')) return 'judged';
  if (REFUSALS.has(status) && code !== undefined) return 'rejected';
  return 'bad';
}

function hasEffect(body: unknown): boolean {
  const effect = (body as { effect?: unknown }).effect;
  return typeof effect === 'object' && effect !== null && !Array.isArray(effect);
}

/** `applied` or `duplicate` from a receiver's success body; undefined for anything else. */
export function outcomeOf(body: unknown): 'applied' | 'duplicate' | undefined {
  const outcome = (body as { outcome?: unknown } | null | undefined)?.outcome;
  return outcome === 'applied' || outcome === 'duplicate' ? outcome : undefined;
}

export function errorCodeOf(body: unknown): string | undefined {
  const code = (body as { error?: { code?: unknown } } | null | undefined)?.error?.code;
  return typeof code === 'string' ? code : undefined;
}

/**
 * The wait after `attempt` failed (1 after the first): exponential from `backoffBaseMs`, capped
 * at `backoffMaxMs`, with "equal jitter" — half fixed, half random — so a burst of gateways
 * spreads out, yet no retry follows its failure at once. `random` is in [0, 1).
 */
export function backoffMs(
  attempt: number,
  random: number,
  policy: Pick<RetryPolicy, 'backoffBaseMs' | 'backoffMaxMs'>,
): number {
  const ceiling = Math.min(policy.backoffMaxMs, policy.backoffBaseMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(ceiling / 2 + (random * ceiling) / 2);
}

export interface RetryState {
  /** Attempts made so far. */
  attempts: number;
  /** When the send began (epoch ms). */
  startedAt: number;
}

export type RetryDecision = { retry: true; delayMs: number } | { retry: false; spent: 'attempts' | 'time' };

/** A retry is made when attempts remain and it would start before the budget's end. */
export function shouldRetry(
  state: RetryState,
  now: number,
  policy: Pick<RetryPolicy, 'attempts' | 'budgetMs' | 'receiverTimeoutMs'>,
  delayMs: number,
): RetryDecision {
  if (state.attempts >= policy.attempts) return { retry: false, spent: 'attempts' };
  if (now + delayMs + minAttemptMs(policy) > state.startedAt + policy.budgetMs) return { retry: false, spent: 'time' };
  return { retry: true, delayMs };
}

/** The shortest attempt worth starting. */
export const MIN_ATTEMPT_MS = 200;

function minAttemptMs(policy: Pick<RetryPolicy, 'receiverTimeoutMs'>): number {
  return Math.min(policy.receiverTimeoutMs, MIN_ATTEMPT_MS);
}

/**
 * How long the next attempt may wait: the receiver timeout, shortened so the send ends within
 * its budget. Zero means the budget is spent: an attempt with only a sliver of budget left
 * (less than MIN_ATTEMPT_MS) would time out by construction and report a timeout the receiver
 * never caused.
 */
export function attemptTimeoutMs(
  state: RetryState,
  now: number,
  policy: Pick<RetryPolicy, 'budgetMs' | 'receiverTimeoutMs'>,
): number {
  const remaining = state.startedAt + policy.budgetMs - now;
  return remaining < minAttemptMs(policy) ? 0 : Math.min(policy.receiverTimeoutMs, remaining);
}

/** One failed attempt, as reported to the caller and in the logs. */
export interface AttemptFailure {
  attempt: number;
  kind: 'timeout' | 'reset' | 'refused' | 'network' | 'status';
  /** The receiver's status and error code, for `status`. */
  status?: number;
  code?: string;
  /** For `timeout`: how long the attempt waited. */
  timeoutMs?: number;
  message: string;
}

/** Describes a result that `classifyAttempt` called `retry`. */
export function failureOf(result: Exchange, attempt: number): AttemptFailure {
  switch (result.kind) {
    case 'timeout':
      return {
        attempt,
        kind: 'timeout',
        timeoutMs: result.timeoutMs,
        message: `no answer within ${result.timeoutMs} ms`,
      };
    case 'reset':
    case 'refused':
    case 'network':
      return { attempt, kind: result.kind, code: result.code, message: result.message };
    case 'response': {
      const code = errorCodeOf(result.body);
      return {
        attempt,
        kind: 'status',
        status: result.status,
        ...(code ? { code } : {}),
        message: `answered ${result.status}${code ? ` ${code}` : ''}`,
      };
    }
    case 'aborted':
      return { attempt, kind: 'network', code: 'ABORTED', message: 'aborted by the caller' };
  }
}

/** 504 when the last attempt timed out (the receiver may be slow, not gone); 502 otherwise. */
export function upstreamStatus(failures: readonly AttemptFailure[]): 502 | 504 {
  return failures.at(-1)?.kind === 'timeout' ? 504 : 502;
}

/** How a message names a downstream: "The receiver", or `Downstream "billing"`. */
export function downstreamWords(downstream: string): string {
  return downstream === DEFAULT_DOWNSTREAM ? 'The receiver' : `Downstream "${downstream}"`;
}

/** A sentence saying what happened on every attempt, what it means, and what to do. */
export function describeUpstreamFailure(
  failures: readonly AttemptFailure[],
  spent: 'attempts' | 'time',
  budgetMs: number,
  downstream = DEFAULT_DOWNSTREAM,
): string {
  const who = downstreamWords(downstream);
  const n = failures.length;
  const on = `on ${n === 1 ? '1 attempt' : `${n} attempts`}${spent === 'time' ? ` (the ${budgetMs} ms retry budget ran out)` : ''}`;
  const kinds = new Set(failures.map((f) => (f.kind === 'status' ? `status ${f.status ?? ''}` : f.kind)));
  const only = kinds.size === 1 ? failures[0] : undefined;
  const maybe = 'the effect may or may not have been applied — resend, it is idempotent.';
  if (only?.kind === 'refused') {
    return `${who} refused the connection ${on}, so the effect was not delivered; check that it is running, and resend once it is back — it is idempotent.`;
  }
  if (only?.kind === 'timeout' && failures.every((f) => f.timeoutMs === only.timeoutMs)) {
    return `${who} did not answer within ${only.timeoutMs ?? 0} ms ${on}; ${maybe}`;
  }
  if (only?.kind === 'reset') return `${who} reset the connection ${on}; ${maybe}`;
  if (only?.kind === 'status') {
    return `${who} answered ${only.status ?? 0}${only.code ? ` (${only.code})` : ''} ${on}; ${maybe}`;
  }
  return `${who} failed ${on} (${failures.map(shortFailure).join('; ')}); ${maybe}`;
}

function shortFailure(failure: AttemptFailure): string {
  switch (failure.kind) {
    case 'timeout':
      return `no answer within ${failure.timeoutMs ?? 0} ms`;
    case 'reset':
      return 'connection reset';
    case 'refused':
      return 'connection refused';
    case 'status':
      return `status ${failure.status ?? 0}${failure.code ? ` ${failure.code}` : ''}`;
    case 'network':
      return `${failure.code ?? 'network error'}: ${failure.message}`;
  }
}
