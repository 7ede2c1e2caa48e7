// A typed client for the queue's HTTP API. Error responses come back as the same QueueError
// (same `code`, same details) the service threw; an unreachable queue is `queue_unavailable`;
// a call whose signal aborts rejects with the signal's reason.
import type http from 'node:http';
import { isQueueErrorCode, QueueError } from './errors.js';
import {
  authorization,
  checkedTimeoutMs,
  errorInBody,
  exchange,
  keepAliveAgent,
  urlUnder,
  type Exchange,
} from '../platform/exchange.js';
import { REQUEST_ID_HEADER } from '../platform/request-id.js';
import type { Job, JobStatus, Lease, RetryInput, Stats } from './types.js';

// The error a client call throws, importable with the client alone (without the service's stores).
export { QueueError, type QueueErrorCode } from './errors.js';

export interface EnqueueInput {
  id?: string;
  qty: number;
  payload?: unknown;
  deadline?: number;
  deadlineMs?: number;
  maxAttempts?: number;
  runAt?: number;
  priority?: number;
}

/** What the holder presents to hand a job back: the lease's owner and token. */
export interface ReleaseInput {
  owner: string;
  token: number;
}

export interface CancelInput {
  /** Why the job is cancelled; kept as the job's `lastError`. */
  reason?: string;
}

export type { RetryInput } from './types.js';

export interface QueueClientOptions {
  /** Per-request timeout (default 10 s); a call's own `timeoutMs` overrides it. */
  timeoutMs?: number;
  agent?: http.Agent;
  /** The queue's API key (`--api-key`), sent as `Authorization: Bearer <apiKey>` on every call. */
  apiKey?: string | undefined;
  /**
   * The largest answer read (default 128 MiB: a batch of 100 leases may carry 100 payloads of
   * up to 1 MiB each); a larger one is `queue_unavailable`.
   */
  maxAnswerBytes?: number;
}

/** Room for the largest answer a queue gives: 100 leases, each payload under the 1 MiB body limit. */
const MAX_ANSWER_BYTES = 128 * 1024 * 1024;

/**
 * The last, optional argument of every QueueClient method. Aborting `signal` rejects the call
 * at once with `signal.reason` — never a QueueError: giving up is the caller's decision, not
 * the queue's failure — and drops its connection; a signal already aborted sends nothing. A
 * write whose request had already reached the queue may still be applied (see each method).
 * `timeoutMs` replaces the client's timeout for this call; running out is `queue_unavailable`.
 */
export interface CallOptions {
  signal?: AbortSignal | undefined;
  timeoutMs?: number | undefined;
  /**
   * Sent as X-Request-Id, so the queue's log lines for this call carry it as `reqId`. A call
   * made while a leasehold service handles a request passes that request's id on by default.
   */
  requestId?: string | undefined;
}

/** An answer, whatever its status. */
type JsonResponse = Extract<Exchange, { kind: 'response' }>;

export class QueueClient {
  readonly baseUrl: URL;
  private readonly agent: http.Agent;
  private readonly ownsAgent: boolean;
  private readonly timeoutMs: number;
  private readonly headers: Record<string, string>;
  private readonly maxAnswerBytes: number;

  constructor(baseUrl: string, options: QueueClientOptions = {}) {
    this.baseUrl = new URL(baseUrl);
    this.agent = options.agent ?? keepAliveAgent();
    this.ownsAgent = options.agent === undefined;
    this.timeoutMs = checkedTimeoutMs(options.timeoutMs ?? 10_000);
    this.headers = authorization(options.apiKey);
    this.maxAnswerBytes = options.maxAnswerBytes ?? MAX_ANSWER_BYTES;
  }

  /**
   * An aborted enqueue may have created the job. With an `id`, the same body again is safe (it
   * answers `created: false` if the first landed); without one, a repeat makes a second job.
   */
  async enqueue(input: EnqueueInput, options?: CallOptions): Promise<{ job: Job; created: boolean }> {
    const res = await this.call('POST', ['jobs'], input, options);
    return { job: (res.body as { job: Job }).job, created: res.status === 201 };
  }

  /**
   * The next lease for `owner`, or null when nothing is claimable. An aborted claim may still
   * have been made: the job is then leased under a token nobody received, and the lease simply
   * expires (rule 2) — the job is claimable again once it ends, with one attempt spent (rule 5).
   */
  async claim(owner: string, leaseMs?: number, options?: CallOptions): Promise<Lease | null> {
    const res = await this.call('POST', ['claims'], leaseMs === undefined ? { owner } : { owner, leaseMs }, options);
    return res.status === 204 ? null : (res.body as { lease: Lease }).lease;
  }

  /**
   * Up to `max` leases for `owner` in one request (empty when nothing was claimable). With
   * `waitMs`, the queue holds the request until a job is claimable or `waitMs` passes (long
   * poll); the call's timeout is then counted from the end of that wait. Aborting drops the
   * request, and the queue stops waiting; a claim already made when it aborts ends as claim's do.
   */
  async claimMany(
    owner: string,
    input: { max: number; leaseMs?: number; waitMs?: number },
    options: CallOptions = {},
  ): Promise<Lease[]> {
    const waitMs = input.waitMs ?? 0;
    const timeoutMs = (options.timeoutMs ?? this.timeoutMs) + waitMs;
    const res = await this.call('POST', ['claims'], { owner, ...input }, { ...options, timeoutMs });
    return res.status === 204 ? [] : (res.body as { leases: Lease[] }).leases;
  }

  /** An aborted heartbeat may or may not have moved `leaseUntil`; owner and token are the same either way. */
  async heartbeat(
    id: string,
    input: { owner: string; token: number; leaseMs?: number },
    options?: CallOptions,
  ): Promise<Lease> {
    return ((await this.call('POST', ['jobs', id, 'heartbeat'], input, options)).body as { lease: Lease }).lease;
  }

  /**
   * An aborted finish may still have been applied. Repeating it is safe, being fenced by the
   * token: if the first did not land, the repeat is answered as it would have been; if it did,
   * the repeat is `stale_lease` (`not_leased`) whose `current` shows the job `done` under the
   * same owner and token.
   */
  async finish(
    id: string,
    input: { owner: string; token: number; result?: unknown },
    options?: CallOptions,
  ): Promise<Job> {
    return ((await this.call('POST', ['jobs', id, 'finish'], input, options)).body as { job: Job }).job;
  }

  /**
   * Finishes, then claims the next job for the same owner in the same transaction: one round
   * trip where finish and claim take two. `next` is null when nothing was claimable. The next
   * lease lasts `leaseMs`, or as long as the finished one. A refused finish claims nothing.
   */
  async finishAndClaim(
    id: string,
    input: { owner: string; token: number; result?: unknown },
    next: { leaseMs?: number } = {},
    options?: CallOptions,
  ): Promise<{ job: Job; next: Lease | null }> {
    const res = await this.call('POST', ['jobs', id, 'finish'], { ...input, next }, options);
    return res.body as { job: Job; next: Lease | null };
  }

  /** Like finish: an aborted fail may have been applied, and a repeat of one that was is refused as `stale_lease`. */
  async fail(
    id: string,
    input: { owner: string; token: number; error: string; retryInMs?: number },
    options?: CallOptions,
  ): Promise<Job> {
    return ((await this.call('POST', ['jobs', id, 'fail'], input, options)).body as { job: Job }).job;
  }

  async verify(id: string, input: { owner: string; token: number }, options?: CallOptions): Promise<Lease> {
    return ((await this.call('POST', ['jobs', id, 'verify'], input, options)).body as { lease: Lease }).lease;
  }

  /**
   * Hands the job back unworked: `pending`, claimable at once, the attempt returned; the next
   * claim gets a higher token. Fenced like finish, and like finish an aborted release may have
   * been applied: a repeat of one that was is `stale_lease` (`not_leased`).
   */
  async release(id: string, input: ReleaseInput, options?: CallOptions): Promise<Job> {
    return ((await this.call('POST', ['jobs', id, 'release'], input, options)).body as { job: Job }).job;
  }

  /**
   * Cancels a `pending` or `leased` job: `dead` with `deadReason: "cancelled"`, its holder
   * refused from then on. A dead job comes back unchanged, so repeating a cancel is safe; a done
   * job is `job_finished`.
   */
  async cancel(id: string, input: CancelInput = {}, options?: CallOptions): Promise<Job> {
    return ((await this.call('POST', ['jobs', id, 'cancel'], input, options)).body as { job: Job }).job;
  }

  /**
   * A `dead` job back to `pending` with `attempts` 0, at `runAt` (default now); its token keeps
   * counting up. `not_dead` for any other job, so a repeat of a retry that landed is refused.
   */
  async retry(id: string, input: RetryInput = {}, options?: CallOptions): Promise<Job> {
    return ((await this.call('POST', ['jobs', id, 'retry'], input, options)).body as { job: Job }).job;
  }

  /**
   * Several lease checks in one request, read at one instant: each answer is the lease or the
   * QueueError that `verify` would have thrown for it, in the order asked (at most 100).
   */
  async verifyMany(
    leases: ReadonlyArray<{ id: string; owner: string; token: number }>,
    options?: CallOptions,
  ): Promise<Array<Lease | QueueError>> {
    const res = await this.call('POST', ['verifications'], { leases }, options);
    return (res.body as { results: Array<{ lease: Lease } | { error: unknown }> }).results.map((result) =>
      'lease' in result ? result.lease : errorFromBody(result, res.status),
    );
  }

  async get(id: string, options?: CallOptions): Promise<Job> {
    return ((await this.call('GET', ['jobs', id], undefined, options)).body as { job: Job }).job;
  }

  /** Jobs in order of enqueue; `after` (the last id of the previous page) pages on. */
  async list(
    query: { status?: JobStatus; limit?: number; after?: string } = {},
    options?: CallOptions,
  ): Promise<Job[]> {
    const params = new URLSearchParams();
    if (query.status) params.set('status', query.status);
    if (query.limit !== undefined) params.set('limit', String(query.limit));
    if (query.after !== undefined) params.set('after', query.after);
    return ((await this.call('GET', ['jobs'], undefined, options, params)).body as { jobs: Job[] }).jobs;
  }

  async stats(options?: CallOptions): Promise<Stats> {
    return (await this.call('GET', ['stats'], undefined, options)).body as Stats;
  }

  /** False when the queue does not answer 200; an aborted call still rejects with the signal's reason. */
  async healthy(options?: CallOptions): Promise<boolean> {
    try {
      return (await this.call('GET', ['healthz'], undefined, options)).status === 200;
    } catch (err) {
      if (err instanceof QueueError) return false;
      throw err;
    }
  }

  close(): void {
    if (this.ownsAgent) this.agent.destroy();
  }

  private async call(
    method: 'GET' | 'POST',
    path: readonly string[],
    body?: unknown,
    options: CallOptions = {},
    query?: URLSearchParams,
  ): Promise<JsonResponse> {
    // Serialised before the request, so a body that is not JSON (a BigInt, a cycle) throws a
    // TypeError here instead of passing for an unreachable queue.
    const json = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const timeoutMs = options.timeoutMs === undefined ? this.timeoutMs : checkedTimeoutMs(options.timeoutMs);
    const res = await exchange({
      method,
      url: urlUnder(this.baseUrl, path, query),
      ...(json ? { body: json } : {}),
      headers:
        options.requestId === undefined ? this.headers : { ...this.headers, [REQUEST_ID_HEADER]: options.requestId },
      timeoutMs,
      agent: this.agent,
      signal: options.signal,
      maxAnswerBytes: this.maxAnswerBytes,
    });
    switch (res.kind) {
      case 'response':
        if (res.status < 400) return res;
        throw errorFromResponse(res);
      case 'aborted':
        throw options.signal?.reason ?? new DOMException('The call was aborted.', 'AbortError');
      case 'timeout':
        throw new QueueError(
          'queue_unavailable',
          `The queue at ${this.baseUrl.origin} did not answer within ${timeoutMs} ms (timed out); ` +
            'if the call was a write, it may or may not have been applied.',
          { cause: `no answer from ${this.baseUrl.origin} within ${timeoutMs} ms` },
        );
      default:
        throw new QueueError(
          'queue_unavailable',
          `The queue at ${this.baseUrl.origin} could not be reached: ${res.message}.`,
          {
            cause: res.message,
          },
        );
    }
  }
}

/** Rebuilds the service's QueueError from an error response. */
export function errorFromResponse(res: JsonResponse): QueueError {
  return errorFromBody(res.body, res.status);
}

/** The QueueError an `{error: {...}}` body carries, from a whole answer or one entry of a batch. */
function errorFromBody(body: unknown, status: number): QueueError {
  const error = errorInBody(body);
  if (error && isQueueErrorCode(error.code)) {
    return new QueueError(error.code, error.message ?? `The queue answered ${status} ${error.code}.`, error.details);
  }
  return new QueueError(
    status >= 500 ? 'internal' : 'invalid_request',
    `The queue answered ${status} without a recognisable error body.`,
    { status },
  );
}
