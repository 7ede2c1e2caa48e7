// The shape of every service's one error class: a stable string `code`, the HTTP status its
// service's table gives that code, details that travel in the body, and the wire form. Each
// service extends it with its own table, so callers handle all three the same way.

/** The codes every service's table has: what can go wrong before a route runs, and the unexpected. */
export const EDGE_ERROR_STATUS = {
  invalid_request: 400,
  /** An API key is required and was not presented (only a service started with one). */
  unauthorized: 401,
  not_found: 404,
  payload_too_large: 413,
  unsupported_media_type: 415,
  internal: 500,
} as const;

export type EdgeErrorCode = keyof typeof EDGE_ERROR_STATUS;

/**
 * A failure at the HTTP edge in the words every service shares; each service's class makes its
 * own error of it with a static `fromEdge`.
 */
export interface EdgeFailure {
  code: EdgeErrorCode;
  message: string;
  details: Record<string, unknown>;
}

/** The wire shape of an error answer: `{error: {code, message, ...details}}`. */
export interface ErrorBody {
  error: { code: string; message: string; [detail: string]: unknown };
}

export abstract class ServiceError<Code extends string = string> extends Error {
  readonly code: Code;
  readonly status: number;
  /** Spread into the body beside code and message. */
  readonly details: Record<string, unknown>;

  /** `options.cause` keeps the underlying error for the log; it is never part of the body. */
  protected constructor(
    code: Code,
    status: number,
    message: string,
    details: Record<string, unknown> = {},
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.code = code;
    this.status = status;
    this.details = details;
  }

  toJSON(): ErrorBody {
    return { error: { code: this.code, message: this.message, ...this.details } };
  }
}

/** Whether `code` is a key of a service's own table (never one inherited from Object). */
export function isCodeOf<Table extends object>(table: Table, code: unknown): code is keyof Table & string {
  return typeof code === 'string' && Object.hasOwn(table, code);
}
