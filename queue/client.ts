// A typed client for the queue's HTTP API. Error responses come back as the same QueueError
// (same `code`, same details) the service threw; an unreachable queue is `queue_unavailable`.
import type http from 'node:http';
import { QUEUE_ERROR_STATUS, QueueError, type QueueErrorCode } from './errors.js';
import { keepAliveAgent, requestJson, type JsonResponse } from './http-json.js';
import type { Job, JobStatus, Lease, Stats } from './types.js';

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

export interface QueueClientOptions {
  /** Per-request timeout. */
  timeoutMs?: number;
  agent?: http.Agent;
}

export class QueueClient {
  readonly baseUrl: URL;
  private readonly agent: http.Agent;
  private readonly ownsAgent: boolean;
  private readonly timeoutMs: number;

  constructor(baseUrl: string, options: QueueClientOptions = {}) {
    this.baseUrl = new URL(baseUrl);
    this.agent = options.agent ?? keepAliveAgent();
    this.ownsAgent = options.agent === undefined;
    this.timeoutMs = options.timeoutMs ?? 10_000;
  }

  async enqueue(input: EnqueueInput): Promise<{ job: Job; created: boolean }> {
    const res = await this.call('POST', '/jobs', input);
    return { job: (res.body as { job: Job }).job, created: res.status === 201 };
  }

  /** The next lease for `owner`, or null when nothing is claimable. */
  async claim(owner: string, leaseMs?: number): Promise<Lease | null> {
    const res = await this.call('POST', '/claims', leaseMs === undefined ? { owner } : { owner, leaseMs });
    return res.status === 204 ? null : (res.body as { lease: Lease }).lease;
  }

  async heartbeat(id: string, input: { owner: string; token: number; leaseMs?: number }): Promise<Lease> {
    return ((await this.call('POST', `/jobs/${encodeURIComponent(id)}/heartbeat`, input)).body as { lease: Lease }).lease;
  }

  async finish(id: string, input: { owner: string; token: number; result?: unknown }): Promise<Job> {
    return ((await this.call('POST', `/jobs/${encodeURIComponent(id)}/finish`, input)).body as { job: Job }).job;
  }

  async fail(id: string, input: { owner: string; token: number; error: string; retryInMs?: number }): Promise<Job> {
    return ((await this.call('POST', `/jobs/${encodeURIComponent(id)}/fail`, input)).body as { job: Job }).job;
  }

  async verify(id: string, input: { owner: string; token: number }): Promise<Lease> {
    return ((await this.call('POST', `/jobs/${encodeURIComponent(id)}/verify`, input)).body as { lease: Lease }).lease;
  }

  async get(id: string): Promise<Job> {
    return ((await this.call('GET', `/jobs/${encodeURIComponent(id)}`)).body as { job: Job }).job;
  }

  async list(query: { status?: JobStatus; limit?: number } = {}): Promise<Job[]> {
    const params = new URLSearchParams();
    if (query.status) params.set('status', query.status);
    if (query.limit !== undefined) params.set('limit', String(query.limit));
    const qs = params.size > 0 ? `?${params}` : '';
    return ((await this.call('GET', `/jobs${qs}`)).body as { jobs: Job[] }).jobs;
  }

  async stats(): Promise<Stats> {
    return (await this.call('GET', '/stats')).body as Stats;
  }

  async healthy(): Promise<boolean> {
    try {
      return (await this.call('GET', '/healthz')).status === 200;
    } catch {
      return false;
    }
  }

  close(): void {
    if (this.ownsAgent) this.agent.destroy();
  }

  private async call(method: 'GET' | 'POST', path: string, body?: unknown): Promise<JsonResponse> {
    // Serialised before the request, so a body that is not JSON (a BigInt, a cycle) throws a
    // TypeError here instead of passing for an unreachable queue.
    const json = body === undefined ? undefined : JSON.stringify(body);
    let res: JsonResponse;
    try {
      res = await requestJson({
        method,
        url: new URL(path, this.baseUrl),
        json,
        timeoutMs: this.timeoutMs,
        agent: this.agent,
      });
    } catch (err) {
      const reason = err instanceof Error ? err.message : String(err);
      throw new QueueError('queue_unavailable', `The queue at ${this.baseUrl.origin} could not be reached: ${reason}.`, {
        cause: reason,
      });
    }
    if (res.status < 400) return res;
    throw errorFromResponse(res);
  }
}

/** Rebuilds the service's QueueError from an error response. */
export function errorFromResponse(res: JsonResponse): QueueError {
  const error = (res.body as { error?: { code?: string; message?: string } } | undefined)?.error;
  if (error?.code && error.code in QUEUE_ERROR_STATUS) {
    const { code, message, ...details } = error as { code: QueueErrorCode; message: string };
    return new QueueError(code, message, details);
  }
  return new QueueError(
    res.status >= 500 ? 'internal' : 'invalid_request',
    `The queue answered ${res.status} without a recognisable error body.`,
    { status: res.status },
  );
}
