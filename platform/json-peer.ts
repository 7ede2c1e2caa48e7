// What every service's client stands on: one peer at a base URL, spoken to in JSON over
// exchange(). It owns the connection pool, the timeouts and the API key, and turns an exchange's
// outcome into the service's own error class: an error answer back into the error the service
// threw, no answer at all into its `<service>_unavailable`, an abort into the signal's reason.
import type http from 'node:http';
import {
  authorization,
  checkedTimeoutMs,
  errorInBody,
  exchange,
  keepAliveAgent,
  urlUnder,
  type AnsweredError,
  type Exchange,
} from './exchange.js';
import { REQUEST_ID_HEADER } from './request-id.js';
import { httpUrl } from './url.js';
import { isCodeOf, ServiceError } from './service-error.js';

/** An answer, whatever its status. */
export type JsonResponse = Extract<Exchange, { kind: 'response' }>;

export interface JsonPeerOptions {
  /** Per-request timeout (default: the client's); a call's own `timeoutMs` overrides it. */
  timeoutMs?: number;
  /** Shared with the caller, who closes it; without one the client makes its own and closes it on close(). */
  agent?: http.Agent;
  /** Sent as `Authorization: Bearer <apiKey>` on every call. */
  apiKey?: string | undefined;
  /** The largest answer read (default: the client's); a larger one is `<service>_unavailable`. */
  maxAnswerBytes?: number;
}

/** What each call may say for itself. */
export interface PeerCallOptions {
  /** Aborting rejects the call at once with `signal.reason` and drops its connection. */
  signal?: AbortSignal | undefined;
  /** Replaces the client's timeout for this call. */
  timeoutMs?: number | undefined;
  /** Sent as X-Request-Id; by default a call made while a request is handled passes that request's id on. */
  requestId?: string | undefined;
}

export interface PeerRequest extends PeerCallOptions {
  method: 'GET' | 'POST';
  /** Segments under the base URL, each encoded whole. */
  path: readonly string[];
  query?: URLSearchParams | undefined;
  /** A value sent as JSON; or `body`, bytes sent as they are (a signature covers them). */
  json?: unknown;
  body?: Buffer | undefined;
  headers?: Record<string, string> | undefined;
}

/** How one service's client words its errors: its class, its table of codes, what to tell a caller. */
export interface PeerErrors<E extends ServiceError> {
  /** The service as messages name it ("The queue at http://..."); "no answer" is `<service>_unavailable`. */
  service: string;
  /** The service's table from code to status: an answered code in it is rebuilt, any other is not. */
  table: Readonly<Record<E['code'], number>>;
  /** The service's error; `status` is the one answered, for the codes whose status is not fixed. */
  create(code: E['code'], message: string, details: Record<string, unknown>, status?: number): E;
  /** Follows "did not answer within N ms (timed out); ": whether a write may have landed, and what to do. */
  afterTimeout: string;
  /** Follows "could not be reached (...)", when there is something to do. */
  afterUnreachable?: string;
}

export interface JsonPeerDefaults {
  timeoutMs: number;
  maxAnswerBytes: number;
}

export abstract class JsonPeer<E extends ServiceError> {
  readonly baseUrl: URL;
  private readonly agent: http.Agent;
  private readonly ownsAgent: boolean;
  /** The client's per-request timeout. */
  protected readonly timeoutMs: number;
  private readonly headers: Record<string, string>;
  private readonly maxAnswerBytes: number;

  protected constructor(
    baseUrl: string,
    options: JsonPeerOptions,
    defaults: JsonPeerDefaults,
    private readonly errors: PeerErrors<E>,
  ) {
    this.baseUrl = httpUrl('baseUrl', baseUrl);
    this.timeoutMs = checkedTimeoutMs(options.timeoutMs ?? defaults.timeoutMs);
    this.headers = authorization(options.apiKey);
    this.maxAnswerBytes = options.maxAnswerBytes ?? defaults.maxAnswerBytes;
    this.agent = options.agent ?? keepAliveAgent();
    this.ownsAgent = options.agent === undefined;
  }

  /** False when the service does not answer `GET /healthz` with 200; an aborted call still rejects with the signal's reason. */
  async healthy(options: PeerCallOptions = {}): Promise<boolean> {
    try {
      return (await this.call({ ...options, method: 'GET', path: ['healthz'] })).status === 200;
    } catch (err) {
      if (err instanceof ServiceError) return false;
      throw err;
    }
  }

  /** Closes the client's own connections; an agent passed in is the caller's to close. */
  close(): void {
    if (this.ownsAgent) this.agent.destroy();
  }

  /**
   * The answer when its status is below 400; otherwise throws the service's error (an error
   * answer, or no answer at all), or the signal's reason when the call was aborted.
   */
  protected async call(request: PeerRequest): Promise<JsonResponse> {
    // Serialised before the request, so a body that is not JSON (a BigInt, a cycle) throws a
    // TypeError here instead of passing for an unreachable service.
    const body = request.json === undefined ? request.body : Buffer.from(JSON.stringify(request.json));
    const timeoutMs = request.timeoutMs === undefined ? this.timeoutMs : checkedTimeoutMs(request.timeoutMs);
    const res = await exchange({
      method: request.method,
      url: urlUnder(this.baseUrl, request.path, request.query),
      ...(body ? { body } : {}),
      headers: {
        ...this.headers,
        ...request.headers,
        ...(request.requestId === undefined ? {} : { [REQUEST_ID_HEADER]: request.requestId }),
      },
      timeoutMs,
      agent: this.agent,
      signal: request.signal,
      maxAnswerBytes: this.maxAnswerBytes,
    });
    if (res.kind === 'response' && res.status < 400) return res;
    if (res.kind === 'aborted') throw request.signal?.reason ?? new DOMException('The call was aborted.', 'AbortError');
    throw this.failure(res, timeoutMs);
  }

  /** The body of the answer to `request`, as the caller knows the route answers it. */
  protected async answer<T>(request: PeerRequest): Promise<T> {
    return (await this.call(request)).body as T;
  }

  /** The service's error an `{error: {...}}` body carries, from a whole answer or one entry of a batch. */
  protected errorFromBody(body: unknown, status: number): E {
    const error: AnsweredError | undefined = errorInBody(body);
    const { service, table, create } = this.errors;
    if (error && isCodeOf(table, error.code)) {
      return create(
        error.code,
        error.message ?? `The ${service} answered ${status} ${error.code}.`,
        error.details,
        status,
      );
    }
    return create(
      this.code(status >= 500 ? 'internal' : 'invalid_request'),
      `The ${service} answered ${status} without a recognisable error body.`,
      { status },
    );
  }

  /** `code` as the service's own: every table has the edge's codes and `<service>_unavailable`. */
  private code(code: string): E['code'] {
    if (!isCodeOf(this.errors.table, code)) throw new Error(`The ${this.errors.service} has no error code ${code}.`);
    return code;
  }

  private failure(res: Exclude<Exchange, { kind: 'aborted' }>, timeoutMs: number): E {
    const { service, create, afterTimeout, afterUnreachable } = this.errors;
    const unavailable = this.code(`${service}_unavailable`);
    const at = `The ${service} at ${this.baseUrl.origin}`;
    switch (res.kind) {
      case 'response':
        return this.errorFromBody(res.body, res.status);
      case 'timeout':
        return create(unavailable, `${at} did not answer within ${timeoutMs} ms (timed out); ${afterTimeout}`, {
          cause: `no answer from ${this.baseUrl.origin} within ${timeoutMs} ms`,
        });
      default:
        return create(
          unavailable,
          `${at} could not be reached (${res.code}: ${res.message})${afterUnreachable ? `; ${afterUnreachable}` : '.'}`,
          { cause: res.message },
        );
    }
  }
}
