// A typed client for the gateway's `POST /send`. Error answers come back as the same
// GatewayError (code, status, details) the gateway rendered; an unreachable gateway is
// `gateway_unavailable`; an aborted send rejects with the signal's reason.
import { GATEWAY_ERROR_STATUS, GatewayError } from './errors.js';
import { checkOptionNames, type OptionNames } from '../platform/option-names.js';
import { JsonPeer, type JsonPeerOptions, type PeerErrors } from '../platform/json-peer.js';
import type { SendOutcome, SendRequest } from './types.js';

export type { SendOutcome, SendRequest } from './types.js';

// The error a send throws, importable with the client alone (without the gateway's app).
export { GatewayError, type GatewayErrorCode } from './errors.js';

export interface GatewayClientOptions {
  /**
   * How long one send may take. The gateway itself answers within its retry budget (10 s by
   * default) plus a queue round trip, so the default (30 s) leaves room for that.
   */
  timeoutMs?: number;
  /** Shared with the caller, who closes it; without one the client makes its own and closes it on close(). */
  agent?: JsonPeerOptions['agent'];
  /** The gateway's API key (`--api-key`), sent as `Authorization: Bearer <apiKey>`. */
  apiKey?: string | undefined;
}

/** A send's answer is an outcome and an effect, or an error: a few KiB at most. */
const MAX_ANSWER_BYTES = 1024 * 1024;

const GATEWAY_CLIENT_OPTION_NAMES: OptionNames<GatewayClientOptions> = { timeoutMs: true, agent: true, apiKey: true };

export class GatewayClient extends JsonPeer<GatewayError> {
  constructor(baseUrl: string, options: GatewayClientOptions = {}) {
    super(
      baseUrl,
      checkOptionNames('GatewayClient', options, GATEWAY_CLIENT_OPTION_NAMES),
      { timeoutMs: 30_000, maxAnswerBytes: MAX_ANSWER_BYTES },
      GATEWAY_ERRORS,
    );
  }

  /** Forwards one effect under the caller's lease. Abort `signal` when the lease is lost. */
  async send(input: SendRequest, options: { signal?: AbortSignal } = {}): Promise<SendOutcome> {
    return this.answer<SendOutcome>({ method: 'POST', path: ['send'], json: input, signal: options.signal });
  }

  /**
   * Several sends in one `POST /sends` (at most 100, within the gateway's 1 MiB body limit), each
   * judged as its own `send` would be: its outcome, or the GatewayError `send` would have thrown,
   * returned rather than thrown, in the order sent. A request refused whole (400, 404 from a
   * gateway without the route) and no answer at all throw, as every call does; an answer that is
   * not one result per send is the caller's to judge (each may or may not have been forwarded).
   */
  async sendMany(
    sends: readonly SendRequest[],
    options: { signal?: AbortSignal } = {},
  ): Promise<Array<SendOutcome | GatewayError>> {
    const res = await this.call({ method: 'POST', path: ['sends'], json: { sends }, signal: options.signal });
    const { results } = res.body as { results?: unknown };
    if (!Array.isArray(results)) return [];
    return results.map((result: unknown) => {
      const { status, body } = (result ?? {}) as { status?: unknown; body?: unknown };
      const answered = typeof status === 'number' ? status : 502;
      if (answered < 400 && typeof body === 'object' && body !== null && 'outcome' in body) return body as SendOutcome;
      return this.errorFromBody(body, answered);
    });
  }
}

/** How the gateway's client words what went wrong. */
const GATEWAY_ERRORS: PeerErrors<GatewayError> = {
  service: 'gateway',
  table: GATEWAY_ERROR_STATUS,
  create: (code, message, details, status) => new GatewayError(code, message, details, status),
  afterTimeout: 'the effect may or may not have been applied — send again, it is idempotent.',
  afterUnreachable: 'send again once it is back.',
};
