// The receiver's one error class and the one table from its codes to HTTP statuses.
// Handlers throw ReceiverError; the error middleware (http-errors.ts) renders it.

export const STATUS_BY_CODE = {
  invalid_request: 400,
  invalid_signature: 401,
  unknown_effect: 404,
  not_found: 404,
  fenced: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  conflict: 422,
  apply_failed: 500,
  internal_error: 500,
  busy: 503,
  // Test mode only: the status is the one the test asked for; 503 when it did not say.
  injected_fault: 503,
} as const;

export type ReceiverErrorCode = keyof typeof STATUS_BY_CODE;

export class ReceiverError extends Error {
  readonly code: ReceiverErrorCode;
  readonly status: number;
  readonly details: Record<string, unknown>;

  /**
   * `status` overrides the table only for `injected_fault`, whose status a test chooses.
   * `options.cause` keeps the underlying error for logs; it is never part of the body.
   */
  constructor(
    code: ReceiverErrorCode,
    message: string,
    details: Record<string, unknown> = {},
    status?: number,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'ReceiverError';
    this.code = code;
    this.status = code === 'injected_fault' && status !== undefined ? status : STATUS_BY_CODE[code];
    this.details = details;
  }

  /** The wire shape every error has: `{error: {code, message, ...details}}`. */
  toBody(): { error: Record<string, unknown> } {
    return { error: { code: this.code, message: this.message, ...this.details } };
  }
}
