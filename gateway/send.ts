// One send: verify the lease with the queue, refuse a qty that is not the job's, forward the
// effect stamped with the verified token, and retry downstream failures — each retry only after
// the lease verifies again, so a lease that ends mid-retry stops the forwarding. The decisions
// themselves live in rules.ts.
import type { Logger } from 'pino';
import { QueueError } from '../queue/client.js';
import type { Lease } from '../queue/types.js';
import { GatewayError } from './errors.js';
import type { Forwarder } from './forwarder.js';
import type { Exchange } from '../platform/exchange.js';
import type { ResolvedGatewayOptions } from './options.js';
import {
  attemptTimeoutMs,
  backoffMs,
  classifyAttempt,
  describeUpstreamFailure,
  failureOf,
  outcomeOf,
  qtyMismatchOf,
  shouldRetry,
  upstreamStatus,
  type AttemptFailure,
  type RetryState,
} from './rules.js';
import type { SendRequest } from './types.js';

export interface SendResult {
  outcome: 'applied' | 'duplicate';
  effect: unknown;
  /** The verified token the effect was forwarded with. */
  token: number;
  attempts: number;
}

/** The one queue call the gateway makes; QueueClient has it. */
export interface LeaseVerifier {
  verify(id: string, input: { owner: string; token: number }, options?: { signal?: AbortSignal }): Promise<Lease>;
}

export interface SendDependencies {
  queue: LeaseVerifier;
  forwarder: Forwarder;
  options: Pick<ResolvedGatewayOptions, 'retry' | 'clock' | 'random' | 'secret'>;
  logger: Logger;
}

export type Send = (request: SendRequest, signal: AbortSignal) => Promise<SendResult>;

/** Throws GatewayError for every refusal; throws `signal.reason` when the caller gave up. */
export function createSend({ queue, forwarder, options, logger }: SendDependencies): Send {
  const { retry, clock, random } = options;

  // Every verified lease is checked against the send's qty before it is forwarded under. A job's
  // qty never changes, so only the first verify can refuse, before anything was forwarded.
  const verify = async (
    request: SendRequest,
    failures: readonly AttemptFailure[],
    signal: AbortSignal,
  ): Promise<Lease> => {
    let lease: Lease;
    try {
      // A caller that hangs up stops the lease check too, not only the forwarding.
      lease = await queue.verify(request.jobId, { owner: request.owner, token: request.token }, { signal });
    } catch (err) {
      throw verifyError(err, failures);
    }
    const mismatch = qtyMismatchOf(request, lease);
    if (mismatch) throw mismatch;
    return lease;
  };

  return async (request, signal) => {
    const state: RetryState = { attempts: 0, startedAt: clock.now() };
    const failures: AttemptFailure[] = [];
    let lease = await verify(request, failures, signal);
    for (;;) {
      const timeoutMs = attemptTimeoutMs(state, clock.now(), retry);
      if (timeoutMs <= 0) throw upstreamError(failures, 'time', retry.budgetMs);
      state.attempts += 1;
      const result = await forwarder.forward(
        { jobId: request.jobId, qty: request.qty },
        lease.token,
        timeoutMs,
        signal,
      );
      switch (classifyAttempt(result)) {
        case 'done':
          return {
            outcome: outcomeOf(bodyOf(result))!,
            effect: effectOf(result),
            token: lease.token,
            attempts: state.attempts,
          };
        case 'judged':
          throw judgedError(result, state.attempts);
        case 'rejected':
          throw rejectedError(result, state.attempts, options.secret !== undefined);
        case 'aborted':
          throw signal.reason ?? new Error('aborted');
        case 'retry':
          failures.push(failureOf(result, state.attempts));
      }
      const decision = shouldRetry(state, clock.now(), retry, backoffMs(state.attempts, random(), retry));
      logger.warn(
        {
          jobId: request.jobId,
          token: lease.token,
          attempt: state.attempts,
          failure: failures.at(-1),
          retry: decision,
        },
        'forward attempt failed',
      );
      if (!decision.retry) throw upstreamError(failures, decision.spent, retry.budgetMs);
      await sleep(decision.delayMs, signal);
      lease = await verify(request, failures, signal);
    }
  };
}

function bodyOf(result: Exchange): unknown {
  return result.kind === 'response' ? result.body : undefined;
}

function effectOf(result: Exchange): unknown {
  return (bodyOf(result) as { effect?: unknown } | undefined)?.effect ?? null;
}

/**
 * The queue's refusal in the gateway's words; after failed attempts, it says the lease ended
 * mid-retry. What reaches the caller names neither the queue's address nor its socket errors:
 * the QueueError saying them is the `cause`, which the error renderer logs. A refusal of the
 * request itself (404, 401, 413...) is a configuration
 * problem between gateway and queue, never reported as the queue being down.
 */
function verifyError(err: unknown, failures: readonly AttemptFailure[]): unknown {
  if (!(err instanceof QueueError)) return err;
  const retrying = failures.length > 0;
  const during = retrying ? { attempts: failures.length, failures } : {};
  const more = retrying ? ` more after ${failures.length} failed ${plural(failures.length, 'attempt')}` : '';
  switch (err.code) {
    case 'stale_lease':
      return new GatewayError(
        'stale_lease',
        retrying
          ? `The lease ended while the gateway was retrying the receiver (after ${failures.length} failed ${plural(failures.length, 'attempt')}), so it stopped forwarding. ${err.message}`
          : `${err.message} Nothing was forwarded.`,
        { ...err.details, ...during },
      );
    case 'unknown_job':
      return new GatewayError('unknown_job', `${err.message} Nothing was forwarded.`, err.details);
    case 'invalid_request':
      return new GatewayError('invalid_request', err.message, err.details);
    case 'queue_unavailable':
    case 'internal':
      return new GatewayError(
        'queue_unavailable',
        // QueueClient's own queue_unavailable (no answer at all) carries the socket error as `cause`.
        err.code === 'queue_unavailable' && err.details.cause !== undefined
          ? `The queue could not be reached, so the gateway forwarded nothing${more}. Send again once the queue is back.`
          : `The queue could not check the lease (${err.status} ${err.code}), so the gateway forwarded nothing${more}. Send again shortly.`,
        { ...during },
        undefined,
        { cause: err },
      );
    default: {
      const hint =
        err.code === 'unauthorized'
          ? "the gateway's --api-key must be the queue's"
          : 'check that --queue points at a leasehold queue';
      return new GatewayError(
        'upstream_rejected',
        `The queue refused the gateway's lease check with ${err.status} ${err.code}, so nothing was forwarded${more}: ${hint}.`,
        { upstream: { service: 'queue', status: err.status, code: err.code }, ...during },
        undefined,
        { cause: err },
      );
    }
  }
}

function upstreamError(failures: AttemptFailure[], spent: 'attempts' | 'time', budgetMs: number): GatewayError {
  return new GatewayError(
    'upstream_unavailable',
    describeUpstreamFailure(failures, spent, budgetMs),
    { attempts: failures.length, failures },
    upstreamStatus(failures),
  );
}

/** 409 fenced / 422 conflict: the receiver's own error, passed through with its details. */
function judgedError(result: Exchange, attempts: number): GatewayError {
  const error = (bodyOf(result) as { error: { code: 'fenced' | 'conflict'; message?: unknown } }).error;
  const { code, message, ...details } = error;
  return new GatewayError(code, typeof message === 'string' ? message : `The receiver answered ${code}.`, {
    ...details,
    attempts,
  });
}

/** The receiver refused the request itself: a configuration problem between gateway and receiver. */
function rejectedError(result: Exchange, attempts: number, signed: boolean): GatewayError {
  const status = result.kind === 'response' ? result.status : 0;
  const body = bodyOf(result) as { error?: { code?: unknown; message?: unknown } } | undefined;
  const code = typeof body?.error?.code === 'string' ? body.error.code : undefined;
  const details = { attempts, upstream: { status, ...(code ? { code } : {}) } };
  if (status < 300) {
    return new GatewayError(
      'upstream_rejected',
      `The receiver answered ${status} without an outcome, so the gateway cannot tell what happened; check that --receiver points at a leasehold receiver.`,
      details,
    );
  }
  const said = typeof body?.error?.message === 'string' ? ` It said: ${body.error.message}` : '';
  const hint =
    status !== 401
      ? ' Check that --receiver points at a leasehold receiver.'
      : signed
        ? ' The gateway and the receiver must share one secret: set the same --secret or LEASEHOLD_SECRET on both.'
        : ' The receiver requires signed requests but the gateway has no secret: start it with --secret or LEASEHOLD_SECRET.';
  return new GatewayError(
    'upstream_rejected',
    `The receiver refused the forwarded request with ${status}${code ? ` ${code}` : ''}, so nothing was applied.${said}${hint}`,
    details,
  );
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason ?? new Error('aborted'));
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason ?? new Error('aborted'));
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

function plural(n: number, word: string): string {
  return n === 1 ? word : `${word}s`;
}
