// The receiver's one error class and the one table from its codes to HTTP statuses.
// Handlers throw ReceiverError; the app's error renderer answers it; ReceiverClient rebuilds it.
import { isCodeOf, ServiceError, type EdgeFailure } from '../platform/service-error.js';

export const RECEIVER_ERROR_STATUS = {
  invalid_request: 400,
  invalid_signature: 401,
  /** An edge code every service has; the receiver itself takes no API key. */
  unauthorized: 401,
  unknown_effect: 404,
  not_found: 404,
  fenced: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  conflict: 422,
  apply_failed: 500,
  internal: 500,
  busy: 503,
  // Test mode only: the status is the one the test asked for; 503 when it did not say.
  injected_fault: 503,
  /** Client side only: the receiver itself could not be reached, or did not answer in time. */
  receiver_unavailable: 503,
} as const;

export type ReceiverErrorCode = keyof typeof RECEIVER_ERROR_STATUS;

export class ReceiverError extends ServiceError<ReceiverErrorCode> {
  override readonly name = 'ReceiverError';

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
    super(
      code,
      code === 'injected_fault' && status !== undefined ? status : RECEIVER_ERROR_STATUS[code],
      message,
      details,
      options,
    );
  }

  static fromEdge(failure: EdgeFailure): ReceiverError {
    return new ReceiverError(failure.code, failure.message, failure.details);
  }
}

export function isReceiverErrorCode(code: unknown): code is ReceiverErrorCode {
  return isCodeOf(RECEIVER_ERROR_STATUS, code);
}
