// The gateway's one error class and its table from code to HTTP status. Routes throw it, the
// app renders it, and GatewayClient rebuilds it from a response, so callers branch on `code`.

export const GATEWAY_ERROR_STATUS = {
  invalid_request: 400,
  not_found: 404,
  unknown_job: 404,
  stale_lease: 409,
  fenced: 409,
  payload_too_large: 413,
  conflict: 422,
  /** The send's qty is not the job's; refused before anything is forwarded. */
  qty_mismatch: 422,
  internal: 500,
  /** Reset, refused or 5xx from the receiver; 504 instead when the last attempt timed out. */
  upstream_unavailable: 502,
  /** The receiver refused the request itself (401 signature, 400, 404...): retrying cannot help. */
  upstream_rejected: 502,
  queue_unavailable: 503,
  /** Client side only: the gateway itself could not be reached. */
  gateway_unavailable: 503,
} as const;

export type GatewayErrorCode = keyof typeof GATEWAY_ERROR_STATUS;

/** Codes whose status is not fixed by the table: the one a 504 can carry. */
const FLEXIBLE_STATUS: ReadonlySet<GatewayErrorCode> = new Set(['upstream_unavailable']);

export class GatewayError extends Error {
  override readonly name = 'GatewayError';
  readonly status: number;

  /** `status` overrides the table only for `upstream_unavailable` (502, or 504 after a timeout). */
  constructor(
    readonly code: GatewayErrorCode,
    message: string,
    readonly details: Record<string, unknown> = {},
    status?: number,
  ) {
    super(message);
    this.status = status !== undefined && FLEXIBLE_STATUS.has(code) ? status : GATEWAY_ERROR_STATUS[code];
  }

  /** The wire shape: `{error: {code, message, ...details}}`. */
  toJSON(): { error: Record<string, unknown> } {
    return { error: { code: this.code, message: this.message, ...this.details } };
  }
}

export function isGatewayErrorCode(code: unknown): code is GatewayErrorCode {
  return typeof code === 'string' && Object.hasOwn(GATEWAY_ERROR_STATUS, code);
}
