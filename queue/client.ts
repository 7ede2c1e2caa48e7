// A typed client for the queue's HTTP API. Error responses come back as the same QueueError
// (same `code`, same details) the service threw; an unreachable queue is `queue_unavailable`;
// a call whose signal aborts rejects with the signal's reason.
import { QUEUE_ERROR_STATUS, QueueError } from './errors.js';
import { checkOptionNames, type OptionNames } from '../platform/option-names.js';
import { JsonPeer, type JsonPeerOptions, type PeerCallOptions, type PeerErrors } from '../platform/json-peer.js';
import type { Job, JobPage, JobStatus, JobSummary, Lease, RetryInput, Stats } from './types.js';

/** Which jobs a listing holds: of `status` when given, after the job `after`, at most `limit` (default 100). */
export interface ListPageQuery {
  status?: JobStatus;
  limit?: number;
  after?: string;
}

function listParams(query: ListPageQuery): URLSearchParams {
  const params = new URLSearchParams();
  if (query.status) params.set('status', query.status);
  if (query.limit !== undefined) params.set('limit', String(query.limit));
  if (query.after !== undefined) params.set('after', query.after);
  return params;
}

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

export interface QueueClientOptions extends JsonPeerOptions {
  /** Per-request timeout (default 10 s); a call's own `timeoutMs` overrides it. */
  timeoutMs?: number;
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
export interface CallOptions extends PeerCallOptions {
  signal?: AbortSignal | undefined;
  timeoutMs?: number | undefined;
  /**
   * Sent as X-Request-Id, so the queue's log lines for this call carry it as `reqId`. A call
   * made while a leasehold service handles a request passes that request's id on by default.
   */
  requestId?: string | undefined;
}

const QUEUE_CLIENT_OPTION_NAMES: OptionNames<QueueClientOptions> = {
  timeoutMs: true,
  agent: true,
  apiKey: true,
  maxAnswerBytes: true,
};

export class QueueClient extends JsonPeer<QueueError> {
  constructor(baseUrl: string, options: QueueClientOptions = {}) {
    super(
      baseUrl,
      checkOptionNames('QueueClient', options, QUEUE_CLIENT_OPTION_NAMES),
      { timeoutMs: 10_000, maxAnswerBytes: MAX_ANSWER_BYTES },
      QUEUE_ERRORS,
    );
  }

  /**
   * An aborted enqueue may have created the job. With an `id`, the same body again is safe (it
   * answers `created: false` if the first landed); without one, a repeat makes a second job.
   */
  async enqueue(input: EnqueueInput, options?: CallOptions): Promise<{ job: Job; created: boolean }> {
    const res = await this.call({ ...options, method: 'POST', path: ['jobs'], json: input });
    return { job: (res.body as { job: Job }).job, created: res.status === 201 };
  }

  /**
   * The next lease for `owner`, or null when nothing is claimable. An aborted claim may still
   * have been made: the job is then leased under a token nobody received, and the lease simply
   * expires (rule 2) — the job is claimable again once it ends, with one attempt spent (rule 5).
   */
  async claim(owner: string, leaseMs?: number, options?: CallOptions): Promise<Lease | null> {
    const res = await this.call({
      ...options,
      method: 'POST',
      path: ['claims'],
      json: leaseMs === undefined ? { owner } : { owner, leaseMs },
    });
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
    const res = await this.call({ ...options, method: 'POST', path: ['claims'], json: { owner, ...input }, timeoutMs });
    return res.status === 204 ? [] : (res.body as { leases: Lease[] }).leases;
  }

  /** An aborted heartbeat may or may not have moved `leaseUntil`; owner and token are the same either way. */
  async heartbeat(
    id: string,
    input: { owner: string; token: number; leaseMs?: number },
    options?: CallOptions,
  ): Promise<Lease> {
    return (
      await this.answer<{ lease: Lease }>({ ...options, method: 'POST', path: ['jobs', id, 'heartbeat'], json: input })
    ).lease;
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
    return (await this.answer<{ job: Job }>({ ...options, method: 'POST', path: ['jobs', id, 'finish'], json: input }))
      .job;
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
    return this.answer({ ...options, method: 'POST', path: ['jobs', id, 'finish'], json: { ...input, next } });
  }

  /**
   * Several finishes of `owner` in one request, judged together in one transaction (at most 100,
   * each job once): `results[i]` answers `finishes[i]` with the job as finished, or the QueueError
   * `finish` would have thrown for it (same code, status and details), returned, not thrown.
   * With `next`, up to one lease per accepted finish is claimed for `owner` in the same
   * transaction, lasting `next.leaseMs` or as long as the first accepted finish's lease did.
   * A refusal of the whole request (`invalid_request`) or a transport failure throws. Like
   * finish, an aborted call may have been applied: repeating it is safe, and a finish that landed
   * answers `stale_lease` (`not_leased`) whose `current` shows the job `done` under the same
   * owner and token.
   */
  async finishMany(
    owner: string,
    finishes: ReadonlyArray<{ id: string; token: number; result?: unknown }>,
    options: CallOptions & { next?: true | { leaseMs?: number } } = {},
  ): Promise<{ results: Array<Job | QueueError>; next: Lease[] }> {
    const { next, ...call } = options;
    const json = next === undefined ? { owner, finishes } : { owner, finishes, next };
    const res = await this.call({ ...call, method: 'POST', path: ['finishes'], json });
    const body = res.body as { results: Array<{ job: Job } | { error: { status?: number } }>; next?: Lease[] };
    return {
      results: body.results.map((result) => {
        if ('job' in result) return result.job;
        // The status travels inside the error only for the batch; the single answer carries it on the response.
        const { status, ...error } = result.error;
        return this.errorFromBody({ error }, typeof status === 'number' ? status : res.status);
      }),
      next: body.next ?? [],
    };
  }

  /** Like finish: an aborted fail may have been applied, and a repeat of one that was is refused as `stale_lease`. */
  async fail(
    id: string,
    input: { owner: string; token: number; error: string; retryInMs?: number },
    options?: CallOptions,
  ): Promise<Job> {
    return (await this.answer<{ job: Job }>({ ...options, method: 'POST', path: ['jobs', id, 'fail'], json: input }))
      .job;
  }

  async verify(id: string, input: { owner: string; token: number }, options?: CallOptions): Promise<Lease> {
    return (
      await this.answer<{ lease: Lease }>({ ...options, method: 'POST', path: ['jobs', id, 'verify'], json: input })
    ).lease;
  }

  /**
   * Hands the job back unworked: `pending`, claimable at once, the attempt returned; the next
   * claim gets a higher token. Fenced like finish, and like finish an aborted release may have
   * been applied: a repeat of one that was is `stale_lease` (`not_leased`).
   */
  async release(id: string, input: ReleaseInput, options?: CallOptions): Promise<Job> {
    return (await this.answer<{ job: Job }>({ ...options, method: 'POST', path: ['jobs', id, 'release'], json: input }))
      .job;
  }

  /**
   * Cancels a `pending` or `leased` job: `dead` with `deadReason: "cancelled"`, its holder
   * refused from then on. A dead job comes back unchanged, so repeating a cancel is safe; a done
   * job is `job_finished`.
   */
  async cancel(id: string, input: CancelInput = {}, options?: CallOptions): Promise<Job> {
    return (await this.answer<{ job: Job }>({ ...options, method: 'POST', path: ['jobs', id, 'cancel'], json: input }))
      .job;
  }

  /**
   * A `dead` job back to `pending` with `attempts` 0, at `runAt` (default now); its token keeps
   * counting up. `not_dead` for any other job, so a repeat of a retry that landed is refused.
   */
  async retry(id: string, input: RetryInput = {}, options?: CallOptions): Promise<Job> {
    return (await this.answer<{ job: Job }>({ ...options, method: 'POST', path: ['jobs', id, 'retry'], json: input }))
      .job;
  }

  /**
   * Several lease checks in one request, read by one statement: each answer is the lease or the
   * QueueError that `verify` would have thrown for it, in the order asked (at most 100).
   */
  async verifyMany(
    leases: ReadonlyArray<{ id: string; owner: string; token: number }>,
    options?: CallOptions,
  ): Promise<Array<Lease | QueueError>> {
    const res = await this.call({ ...options, method: 'POST', path: ['verifications'], json: { leases } });
    return (res.body as { results: Array<{ lease: Lease } | { error: unknown }> }).results.map((result) =>
      'lease' in result ? result.lease : this.errorFromBody(result, res.status),
    );
  }

  async get(id: string, options?: CallOptions): Promise<Job> {
    return (await this.answer<{ job: Job }>({ ...options, method: 'GET', path: ['jobs', id] })).job;
  }

  /**
   * One page of jobs in order of enqueue (`listPage`'s jobs). A page holds fewer than `limit`
   * jobs when their payloads pass 16 MiB, so page on with `listPage` and its `next`.
   */
  async list(query: ListPageQuery = {}, options?: CallOptions): Promise<Job[]> {
    return (await this.listPage(query, options)).jobs;
  }

  /**
   * Up to `limit` jobs in order of enqueue, fewer when their payloads, results and errors pass
   * 16 MiB, and `next`: the `after` of the page that follows, null after the last.
   */
  async listPage(query: ListPageQuery = {}, options?: CallOptions): Promise<JobPage<Job>> {
    return this.answer<JobPage<Job>>({ ...options, method: 'GET', path: ['jobs'], query: listParams(query) });
  }

  /** Like listPage, but without payload, result and lastError: only `limit` cuts the page. */
  async listSummaries(query: ListPageQuery = {}, options?: CallOptions): Promise<JobPage<JobSummary>> {
    const params = listParams(query);
    params.set('lean', 'true');
    return this.answer<JobPage<JobSummary>>({ ...options, method: 'GET', path: ['jobs'], query: params });
  }

  async stats(options?: CallOptions): Promise<Stats> {
    return this.answer<Stats>({ ...options, method: 'GET', path: ['stats'] });
  }
}

/** How the queue's client words what went wrong. */
const QUEUE_ERRORS: PeerErrors<QueueError> = {
  service: 'queue',
  table: QUEUE_ERROR_STATUS,
  create: (code, message, details) => new QueueError(code, message, details),
  afterTimeout: 'if the call was a write, it may or may not have been applied.',
};
