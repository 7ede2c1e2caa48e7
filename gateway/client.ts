// A typed client for the gateway's `POST /send`. Error answers come back as the same
// GatewayError (code, status, details) the gateway rendered; an unreachable gateway is
// `gateway_unavailable`; an aborted send rejects with the signal's reason.
import type http from 'node:http';
import { GatewayError, isGatewayErrorCode } from './errors.js';
import { authorization, errorInBody, exchange, keepAliveAgent, urlUnder } from '../platform/exchange.js';
import type { SendOutcome, SendRequest } from './types.js';

export type { SendOutcome, SendRequest } from './types.js';

// The error a send throws, importable with the client alone (without the gateway's app).
export { GatewayError, type GatewayErrorCode } from './errors.js';

export interface GatewayClientOptions {
  /**
   * How long one send may take. The gateway itself answers within its retry budget (10 s by
   * default) plus a queue round trip, so the default leaves room for that.
   */
  timeoutMs?: number;
  agent?: http.Agent;
  /** The gateway's API key (`--api-key`), sent as `Authorization: Bearer <apiKey>`. */
  apiKey?: string | undefined;
}

/** A send's answer is an outcome and an effect, or an error: a few KiB at most. */
const MAX_ANSWER_BYTES = 1024 * 1024;

export class GatewayClient {
  readonly baseUrl: URL;
  private readonly agent: http.Agent;
  private readonly ownsAgent: boolean;
  private readonly timeoutMs: number;
  private readonly headers: Record<string, string>;

  constructor(baseUrl: string, options: GatewayClientOptions = {}) {
    this.baseUrl = new URL(baseUrl);
    this.agent = options.agent ?? keepAliveAgent();
    this.ownsAgent = options.agent === undefined;
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.headers = authorization(options.apiKey);
  }

  /** Forwards one effect under the caller's lease. Abort `signal` when the lease is lost. */
  async send(input: SendRequest, options: { signal?: AbortSignal } = {}): Promise<SendOutcome> {
    const url = urlUnder(this.baseUrl, ['send']);
    const body = Buffer.from(JSON.stringify(input));
    const result = await exchange({
      method: 'POST',
      url,
      body,
      headers: this.headers,
      timeoutMs: this.timeoutMs,
      agent: this.agent,
      signal: options.signal,
      maxAnswerBytes: MAX_ANSWER_BYTES,
    });
    switch (result.kind) {
      case 'aborted':
        throw options.signal?.reason ?? new DOMException('The send was aborted.', 'AbortError');
      case 'response':
        if (result.status === 200) return result.body as SendOutcome;
        throw errorFromResponse(result.status, result.body);
      case 'timeout':
        throw new GatewayError(
          'gateway_unavailable',
          `The gateway at ${this.baseUrl.origin} did not answer within ${this.timeoutMs} ms; the effect may or may not have been applied — send again, it is idempotent.`,
          { cause: 'timeout' },
        );
      default:
        throw new GatewayError(
          'gateway_unavailable',
          `The gateway at ${this.baseUrl.origin} could not be reached (${result.code}: ${result.message}); send again once it is back.`,
          { cause: result.kind },
        );
    }
  }

  close(): void {
    if (this.ownsAgent) this.agent.destroy();
  }
}

/** Rebuilds the gateway's GatewayError from an error answer. */
export function errorFromResponse(status: number, body: unknown): GatewayError {
  const error = errorInBody(body);
  if (error && isGatewayErrorCode(error.code)) {
    return new GatewayError(
      error.code,
      error.message ?? `The gateway answered ${status} ${error.code}.`,
      error.details,
      status,
    );
  }
  return new GatewayError(
    status >= 500 ? 'internal' : 'invalid_request',
    `The gateway answered ${status} without a recognisable error body.`,
    { status },
  );
}
