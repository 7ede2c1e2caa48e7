// One send: pick the downstream it names, verify the lease with the queue, refuse a default
// effect whose qty is not the job's, forward the effect stamped with the verified token, and retry
// downstream failures — each retry only after the lease verifies again, so a lease that ends
// mid-retry stops the forwarding. The decisions themselves live in rules.ts.
import type { Logger } from 'pino';
import { QueueError } from '../queue/client.js';
import type { Lease } from '../queue/types.js';
import { downstreamSecretVariable } from './downstreams.js';
import { GatewayError } from './errors.js';
import type { BadBatch, Forwarder } from './forwarder.js';
import type { Exchange } from '../platform/exchange.js';
import type { ResolvedGatewayOptions } from './options.js';
import {
  attemptTimeoutMs,
  backoffMs,
  classifyAttempt,
  describeUpstreamFailure,
  downstreamWords,
  failureOf,
  outcomeOf,
  qtyMismatchOf,
  shouldRetry,
  upstreamStatus,
  type AttemptFailure,
  type RetryState,
} from './rules.js';
import { DEFAULT_DOWNSTREAM, type SendRequest } from './types.js';

export interface SendResult {
  outcome: 'applied' | 'duplicate';
  effect: unknown;
  /** The downstream it was forwarded to. */
  downstream: string;
  /** The verified token the effect was forwarded with. */
  token: number;
  attempts: number;
}

/** The one queue call the gateway makes; QueueClient has it. */
export interface LeaseVerifier {
  verify(id: string, input: { owner: string; token: number }, options?: { signal?: AbortSignal }): Promise<Lease>;
}

/** One downstream as a send sees it: where it forwards, and whether what it forwards is signed. */
export interface DownstreamForwarder {
  forwarder: Forwarder;
  signed: boolean;
}

export interface SendDependencies {
  queue: LeaseVerifier;
  /** By downstream name; a send's `to` (default `receiver`) picks one. */
  downstreams: ReadonlyMap<string, DownstreamForwarder>;
  options: Pick<ResolvedGatewayOptions, 'retry' | 'clock' | 'random'>;
  logger: Logger;
}

export type Send = (request: SendRequest, signal: AbortSignal) => Promise<SendResult>;

/** Throws GatewayError for every refusal; throws `signal.reason` when the caller gave up. */
export function createSend({ queue, downstreams, options, logger }: SendDependencies): Send {
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
    const name = request.to ?? DEFAULT_DOWNSTREAM;
    const downstream = downstreams.get(name);
    // Before the lease check: a send that can go nowhere asks the queue nothing.
    if (downstream === undefined) throw unknownDownstream(name, [...downstreams.keys()]);
    const { forwarder } = downstream;
    const effect = { jobId: request.jobId, key: request.key, qty: request.qty, body: request.body };
    const state: RetryState = { attempts: 0, startedAt: clock.now() };
    const failures: AttemptFailure[] = [];
    let lease = await verify(request, failures, signal);
    for (;;) {
      const timeoutMs = attemptTimeoutMs(state, clock.now(), retry);
      if (timeoutMs <= 0) throw upstreamError(failures, 'time', retry.budgetMs, name);
      state.attempts += 1;
      // A retry goes alone: the batch its first attempt rode in failed, and need not fail it again.
      const result = await forwarder.forward(effect, lease.token, timeoutMs, { signal, alone: state.attempts > 1 });
      if (result.kind === 'bad_batch') throw badBatchError(result, state.attempts, name);
      switch (classifyAttempt(result)) {
        case 'done':
          return {
            outcome: outcomeOf(bodyOf(result))!,
            effect: effectOf(result),
            downstream: name,
            token: lease.token,
            attempts: state.attempts,
          };
        case 'judged':
          throw judgedError(result, state.attempts, name);
        case 'rejected':
          throw (
            totalsRefusal(result, request, state.attempts, name) ??
            rejectedError(result, state.attempts, name, downstream.signed)
          );
        case 'bad':
          throw badDownstreamError(result, state.attempts, name);
        case 'aborted':
          throw signal.reason ?? new Error('aborted');
        case 'retry':
          failures.push(failureOf(result, state.attempts));
      }
      const decision = shouldRetry(state, clock.now(), retry, backoffMs(state.attempts, random(), retry));
      // The attempt that ends the send is reported in the send's own line (app.ts), among its `failures`.
      if (!decision.retry) throw upstreamError(failures, decision.spent, retry.budgetMs, name);
      logger.warn(
        {
          jobId: request.jobId,
          token: lease.token,
          downstream: name,
          attempt: state.attempts,
          failure: failures.at(-1),
          retry: decision,
        },
        'forward attempt failed',
      );
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
 * the QueueError saying them is the `cause`, which the send's log line carries (app.ts). A
 * refusal of the request itself (404, 401, 413...) is a configuration problem between gateway
 * and queue, never reported as the queue being down.
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

function upstreamError(
  failures: AttemptFailure[],
  spent: 'attempts' | 'time',
  budgetMs: number,
  downstream: string,
): GatewayError {
  return new GatewayError(
    'upstream_unavailable',
    describeUpstreamFailure(failures, spent, budgetMs, downstream),
    { downstream, attempts: failures.length, failures },
    upstreamStatus(failures),
  );
}

/** A `to` the gateway was not started with: nothing is checked or sent. */
function unknownDownstream(name: string, known: readonly string[]): GatewayError {
  return new GatewayError(
    'unknown_downstream',
    `The gateway has no downstream named ${JSON.stringify(name)}, so nothing was sent; it forwards to ${known.map((k) => JSON.stringify(k)).join(', ')} (start it with --downstream ${name}=URL to add one).`,
    { to: name, downstreams: [...known] },
  );
}

/** 409 fenced / 422 conflict: the downstream's own error, passed through with its details. */
function judgedError(result: Exchange, attempts: number, downstream: string): GatewayError {
  const error = (bodyOf(result) as { error: { code: 'fenced' | 'conflict'; message?: unknown } }).error;
  const { code, message, ...details } = error;
  return new GatewayError(
    code,
    typeof message === 'string' ? message : `${downstreamWords(downstream)} answered ${code}.`,
    {
      ...details,
      downstream,
      attempts,
    },
  );
}

/** The flag an operator fixes a downstream's address with. */
function addressFlag(downstream: string): string {
  return downstream === DEFAULT_DOWNSTREAM ? '--receiver' : `--downstream ${downstream}`;
}

/** The downstream refused the request itself: a configuration problem between gateway and downstream. */
function rejectedError(result: Exchange, attempts: number, downstream: string, signed: boolean): GatewayError {
  const { status, code, message } = answerOf(result);
  const who = downstreamWords(downstream);
  const said = message !== undefined ? ` It said: ${message}` : '';
  const secretFlags =
    downstream === DEFAULT_DOWNSTREAM
      ? '--secret or LEASEHOLD_SECRET'
      : `--downstream-secret ${downstream}=SECRET or ${downstreamSecretVariable(downstream)}`;
  const hint =
    status !== 401
      ? ` Check that ${addressFlag(downstream)} points at ${downstream === DEFAULT_DOWNSTREAM ? 'a leasehold receiver' : 'its effect endpoint'}.`
      : signed
        ? downstream === DEFAULT_DOWNSTREAM
          ? ' The gateway and the receiver must share one secret: set the same --secret or LEASEHOLD_SECRET on both.'
          : ` The gateway and downstream "${downstream}" must share one secret: give the gateway its secret with ${secretFlags}.`
        : ` ${who} requires signed requests but the gateway has no secret for it: start it with ${secretFlags}.`;
  return new GatewayError(
    'upstream_rejected',
    `${who} refused the forwarded request with ${status}${code ? ` ${code}` : ''}, so nothing was applied.${said}${hint}`,
    { downstream, attempts, upstream: { status, ...(code ? { code } : {}) } },
  );
}

/**
 * The receiver's 400 for an effect whose qty would take the sum of its applied quantities past
 * 2^53 - 1 (its error carries `totalQty`): the send's qty is the problem, not the configuration,
 * so the advice is about the qty. Undefined for any other refusal.
 */
function totalsRefusal(
  result: Exchange,
  request: SendRequest,
  attempts: number,
  downstream: string,
): GatewayError | undefined {
  const { status, code } = answerOf(result);
  const totalQty = (bodyOf(result) as { error?: { totalQty?: unknown } }).error?.totalQty;
  if (status !== 400 || request.qty === undefined || !Number.isSafeInteger(totalQty)) return undefined;
  const effect =
    request.key !== undefined
      ? `effect ${JSON.stringify(request.key)} of job ${JSON.stringify(request.jobId)}`
      : `job ${JSON.stringify(request.jobId)}'s default effect`;
  const advice =
    request.key !== undefined
      ? 'send the effect with a smaller qty, or with a body and no qty'
      : `the default effect's qty is the job's, so cancel job ${JSON.stringify(request.jobId)} and enqueue it again with the qty it should have`;
  return new GatewayError(
    'upstream_rejected',
    `${downstreamWords(downstream)} refused ${effect} with ${status}${code ? ` ${code}` : ''}, so nothing was applied: its qty ${request.qty} would take the sum of the quantities applied there (${String(totalQty)}) past ${Number.MAX_SAFE_INTEGER}, the most its totals can hold. The send's qty is the problem, not the gateway's configuration, and the same send is refused again: ${advice}.`,
    {
      downstream,
      attempts,
      upstream: { status, ...(code ? { code } : {}) },
      jobId: request.jobId,
      ...(request.key !== undefined ? { key: request.key } : {}),
      qty: request.qty,
      totalQty,
    },
  );
}

/** An answer outside the protocol: never reported as applied, whatever its status says. */
function badDownstreamError(result: Exchange, attempts: number, downstream: string): GatewayError {
  const { status, code } = answerOf(result);
  const shape =
    status === 200 || status === 201
      ? `${status} without ${status === 201 ? '{outcome: "applied", effect}' : '{outcome: "duplicate", effect}'}`
      : `${status}${code ? ` ${code}` : ''}`;
  return new GatewayError(
    'bad_downstream',
    `${downstreamWords(downstream)} answered ${shape}, which is not an answer of the fencing protocol, so the gateway cannot tell what happened and reports nothing as applied. Check that ${addressFlag(downstream)} points at a fenced effect endpoint (leasehold conform checks one).`,
    { downstream, attempts, upstream: { status, ...(code ? { code } : {}) } },
  );
}

/** A batch answered outside the protocol: no effect in it is reported as applied. */
function badBatchError(result: BadBatch, attempts: number, downstream: string): GatewayError {
  const { status, code, problem } = result;
  return new GatewayError(
    'bad_downstream',
    `${downstreamWords(downstream)} ${problem} to a batch of effects, which is not an answer of the fencing protocol, so the gateway cannot tell what happened to this effect and reports nothing as applied. Check that ${addressFlag(downstream)} points at a fenced effect endpoint (leasehold conform checks one).`,
    { downstream, attempts, upstream: { status, ...(code ? { code } : {}) } },
  );
}

function answerOf(result: Exchange): { status: number; code: string | undefined; message: string | undefined } {
  const status = result.kind === 'response' ? result.status : 0;
  const body = bodyOf(result) as { error?: { code?: unknown; message?: unknown } } | undefined;
  const error = typeof body === 'object' && body !== null ? body.error : undefined;
  return {
    status,
    code: typeof error?.code === 'string' ? error.code : undefined,
    message: typeof error?.message === 'string' ? error.message : undefined,
  };
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
