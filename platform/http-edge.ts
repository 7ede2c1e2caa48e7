// The HTTP edge the three services share: bodies read the same way; what fails before a route
// runs (the body parser, a schema, an unknown route) turned into the service's own error; one
// renderer of `{error: {code, message, ...details}}`; one request log.
import express, { type ErrorRequestHandler, type RequestHandler, type Response } from 'express';
import type { Logger } from 'pino';
import type { z } from 'zod';
import type { EdgeFailure, ServiceError } from './service-error.js';

/** Every body is at most 1 MiB; exactly 1 MiB is accepted. */
export const BODY_LIMIT_BYTES = 1024 * 1024;

/** The service's `fromEdge`: every service's table has the edge codes. */
export type MakeServiceError = (failure: EdgeFailure) => ServiceError;

/** JSON whatever the Content-Type, so a client that forgets the header is not refused for it. */
export function jsonBody(): RequestHandler {
  return express.json({ limit: BODY_LIMIT_BYTES, type: () => true });
}

/**
 * What a route threw, when it is not the service's own error: a body parser's failure by its
 * `type` (express.json and express.raw mark theirs), anything else `internal`, which the
 * renderer logs.
 */
export function edgeFailureOf(err: unknown, service: string): EdgeFailure {
  return (
    bodyParserFailure(err) ?? {
      code: 'internal',
      message: `The ${service} failed unexpectedly; the error is in its log. Retry the request.`,
      details: {},
    }
  );
}

/**
 * A charset or Content-Encoding that cannot be read is 415, not 400: the body may be fine, only
 * in a form the service does not take.
 */
function bodyParserFailure(err: unknown): EdgeFailure | undefined {
  const type = (err as { type?: unknown } | null)?.type;
  switch (type) {
    case 'entity.too.large':
      return {
        code: 'payload_too_large',
        message: `The request body is larger than 1 MiB (${BODY_LIMIT_BYTES} bytes); send a smaller body.`,
        details: { limitBytes: BODY_LIMIT_BYTES },
      };
    case 'entity.parse.failed':
      return {
        code: 'invalid_request',
        message: 'The request body is not valid JSON; send a JSON object.',
        details: {},
      };
    case 'encoding.unsupported':
    case 'charset.unsupported':
      return {
        code: 'unsupported_media_type',
        message: 'The request body uses a Content-Encoding or charset that cannot be read here; send UTF-8 JSON.',
        details: {},
      };
    case 'request.aborted':
    case 'request.size.invalid':
      return {
        code: 'invalid_request',
        message: 'The request body ended before its declared length; send it again.',
        details: {},
      };
  }
  return undefined;
}

export interface Issue {
  path: string;
  message: string;
}

/**
 * `value` parsed by `schema`, or the service's `400 invalid_request` naming every issue; `what`
 * is what was parsed ("request body", "query string"). An absent body (undefined) is read as
 * `{}`, so the schema says which fields are missing.
 */
export function parseWith<T extends z.ZodType>(
  schema: T,
  value: unknown,
  what: string,
  make: MakeServiceError,
): z.infer<T> {
  const result = schema.safeParse(value === undefined ? {} : value);
  if (result.success) return result.data;
  const issues: Issue[] = result.error.issues.map((issue) => ({
    path: issue.path.map(String).join('.'),
    message: issue.message,
  }));
  throw make({
    code: 'invalid_request',
    message: `The ${what} is invalid: ${issues.map(describe).join('; ')}.`,
    details: { issues },
  });
}

/** The message, led by its path unless the message already starts with it ("qty must be..."). */
function describe(issue: Issue): string {
  return issue.path === '' || issue.message.startsWith(issue.path) ? issue.message : `${issue.path}: ${issue.message}`;
}

/** The last route: anything not matched above, an unknown method on a known path included, is `404 not_found`. */
export function unknownRoute(make: MakeServiceError, service: string, routes: string): RequestHandler {
  return (req, _res, next) => {
    next(
      make({
        code: 'not_found',
        message: `There is no ${req.method} ${req.path} on the ${service}; ${routes}.`,
        details: {},
      }),
    );
  };
}

/** The code each error answer carried, for the request log. */
const answeredCodes = new WeakMap<Response, string>();

/**
 * The one error middleware: `toError` turns whatever was thrown into the service's error (its
 * own as thrown; anything unexpected `internal`). Logged here, with the stack, is what is not
 * the caller's doing: an unexpected error, and a 5xx that carries the failure behind it as
 * `cause` (a database that stayed unreachable). Every other answer is the request log's.
 */
export function errorRenderer(toError: (err: unknown) => ServiceError, logger: Logger): ErrorRequestHandler {
  return (err, req, res, next) => {
    const error = toError(err);
    const unexpected = error !== err;
    if (error.status >= 500 && (unexpected || error.cause !== undefined)) {
      logger.error(
        { err, code: error.code, method: req.method, path: req.path },
        unexpected ? 'unexpected error' : error.message,
      );
    }
    // Too late for an answer: express closes the connection, and the caller sees it cut.
    if (res.headersSent) return next(err);
    answeredCodes.set(res, error.code);
    res.status(error.status).json(error.toJSON());
  };
}

/** One line per answered request: debug when it succeeded, info when refused (4xx), warn when it failed (5xx). */
export function requestLog(logger: Logger): RequestHandler {
  return (req, res, next) => {
    const started = process.hrtime.bigint();
    res.on('finish', () => {
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      const code = answeredCodes.get(res);
      const entry = {
        method: req.method,
        path: req.path,
        status: res.statusCode,
        ...(code ? { code } : {}),
        ms: Math.round(ms * 10) / 10,
      };
      if (res.statusCode >= 500) logger.warn(entry, 'request failed');
      else if (res.statusCode >= 400) logger.info(entry, 'request refused');
      else logger.debug(entry, 'request');
    });
    next();
  };
}

/**
 * An AbortSignal that fires when the caller hangs up before the answer, so work done only for
 * that caller (a gateway's retries, a long-polling claim) stops; `done()` detaches it.
 */
export function callerGone(res: Response): { signal: AbortSignal; done(): void } {
  const controller = new AbortController();
  const onClose = () => {
    if (!res.writableFinished) controller.abort(new Error('the caller closed the connection'));
  };
  res.on('close', onClose);
  return { signal: controller.signal, done: () => res.off('close', onClose) };
}
