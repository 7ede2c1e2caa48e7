// The gateway's one error class and its table from code to HTTP status. Routes throw it, the
// app renders it, and GatewayClient rebuilds it from a response, so callers branch on `code`.
import { isCodeOf, ServiceError, type EdgeFailure } from '../platform/service-error.js';

export const GATEWAY_ERROR_STATUS = {
  invalid_request: 400,
  /** The send's `to` names no downstream the gateway was started with; nothing is sent. */
  unknown_downstream: 400,
  /** With --api-key: the request did not carry `Authorization: Bearer <key>`. */
  unauthorized: 401,
  not_found: 404,
  unknown_job: 404,
  stale_lease: 409,
  fenced: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  conflict: 422,
  /** The send's qty is not the job's; refused before anything is forwarded. */
  qty_mismatch: 422,
  internal: 500,
  /** Reset, refused or 5xx from the receiver; 504 instead when the last attempt timed out. */
  upstream_unavailable: 502,
  /** The receiver refused the request itself (401 signature, 400, 404...): retrying cannot help. */
  upstream_rejected: 502,
  /** A downstream answered outside the protocol (a status or body no fenced downstream gives); `downstream` names it. */
  bad_downstream: 502,
  queue_unavailable: 503,
  /** Client side only: the gateway itself could not be reached. */
  gateway_unavailable: 503,
} as const;

export type GatewayErrorCode = keyof typeof GATEWAY_ERROR_STATUS;

/** Codes whose status is not fixed by the table: the one a 504 can carry. */
const FLEXIBLE_STATUS: ReadonlySet<GatewayErrorCode> = new Set(['upstream_unavailable']);

export class GatewayError extends ServiceError<GatewayErrorCode> {
  override readonly name = 'GatewayError';

  /**
   * `status` overrides the table only for `upstream_unavailable` (502, or 504 after a timeout).
   * `options.cause` keeps the underlying error for logs; it is never part of the body.
   */
  constructor(
    code: GatewayErrorCode,
    message: string,
    details: Record<string, unknown> = {},
    status?: number,
    options?: ErrorOptions,
  ) {
    super(
      code,
      status !== undefined && FLEXIBLE_STATUS.has(code) ? status : GATEWAY_ERROR_STATUS[code],
      message,
      details,
      options,
    );
  }

  static fromEdge(failure: EdgeFailure): GatewayError {
    return new GatewayError(failure.code, failure.message, failure.details);
  }
}

export function isGatewayErrorCode(code: unknown): code is GatewayErrorCode {
  return isCodeOf(GATEWAY_ERROR_STATUS, code);
}
