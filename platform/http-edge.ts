// The HTTP edge the three services share: bodies read the same way (json-body.ts); what fails before a route runs (the body parser, a path, a schema, an unknown route,
// a missing API key) turned into the service's own error; one renderer of
// `{error: {code, message, ...details}}`; one request log.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { ErrorRequestHandler, Request, RequestHandler, Response } from 'express';
import type { Logger } from 'pino';
import type { z } from 'zod';
import { checkApiKey } from './exchange.js';
import { BODY_LIMIT_BYTES, MAX_JSON_DEPTH, MAX_JSON_KEYS } from './json-body.js';
import type { EdgeFailure, ServiceError } from './service-error.js';

export {
  BODY_LIMIT_BYTES,
  hasProtoKey,
  jsonBody,
  jsonDeeperThan,
  jsonKeyCount,
  MAX_JSON_DEPTH,
  MAX_JSON_KEYS,
  rawJsonBody,
} from './json-body.js';

/** The service's `fromEdge`: every service's table has the edge codes. */
export type MakeServiceError = (failure: EdgeFailure) => ServiceError;

/**
 * `Authorization: Bearer <apiKey>` on every request but `GET` (or `HEAD`) `/healthz`
 * (`401 unauthorized`, with `WWW-Authenticate: Bearer`, otherwise); a no-op without a key.
 * Mounted before any body is read, so a caller without the key costs no parsing: a
 * `POST /healthz` needs the key too. The key and the presented value are both
 * hashed first, so the comparison takes the same time whatever their lengths and contents.
 */
export function requireApiKey(apiKey: string | undefined, make: MakeServiceError, service: string): RequestHandler {
  if (apiKey === undefined) return (_req, _res, next) => next();
  const expected = digest(checkApiKey(apiKey));
  return (req, res, next) => {
    if (req.path === '/healthz' && (req.method === 'GET' || req.method === 'HEAD')) return next();
    const presented = bearerToken(req.headers.authorization);
    if (presented !== undefined && timingSafeEqual(digest(presented), expected)) return next();
    res.set('WWW-Authenticate', 'Bearer');
    next(
      make({
        code: 'unauthorized',
        message:
          presented === undefined
            ? `The ${service} requires an API key: send "Authorization: Bearer <key>" with the key it was started with (--api-key or LEASEHOLD_API_KEY).`
            : `The API key presented is not the ${service}'s; send the key it was started with (--api-key or LEASEHOLD_API_KEY).`,
        details: {},
      }),
    );
  };
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}

function bearerToken(header: string | undefined): string | undefined {
  const match = /^Bearer +(\S+) *$/i.exec(header ?? '');
  return match?.[1];
}

/**
 * What a route threw, when it is not the service's own error: a body parser's failure by its
 * `type` (express.json and express.raw mark theirs, and this edge marks its own), a path that is
 * not valid percent-encoding, anything else `internal`, which the renderer logs.
 */
export function edgeFailureOf(err: unknown, service: string): EdgeFailure {
  return (
    bodyParserFailure(err) ??
    pathFailure(err) ?? {
      code: 'internal',
      message: `The ${service} failed unexpectedly; the error is in its log. Retry the request.`,
      details: {},
    }
  );
}

/** The router's failure to decode a path parameter (`/jobs/%ZZ`): the caller's path is malformed. */
function pathFailure(err: unknown): EdgeFailure | undefined {
  if (!(err instanceof URIError) || (err as { status?: unknown }).status !== 400) return undefined;
  return {
    code: 'invalid_request',
    message:
      'The path is not valid percent-encoding (a "%" must start a UTF-8 byte as two hex digits, as in %2F); encode each path segment with encodeURIComponent.',
    details: {},
  };
}

/**
 * A charset or Content-Encoding that cannot be read is 415, not 400: the body may be fine, only
 * in a form the service does not take. A body that claims an encoding it does not have is 400.
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
    case 'entity.parse.failed': {
      const kind = scalarKind((err as { body?: unknown }).body);
      return {
        code: 'invalid_request',
        message:
          kind === undefined
            ? 'The request body is not valid JSON; send a JSON object.'
            : notAnObject('request body', kind),
        details: {},
      };
    }
    case 'entity.utf8.invalid':
      return {
        code: 'invalid_request',
        message: 'The request body is not valid UTF-8; send JSON encoded in UTF-8.',
        details: {},
      };
    case 'entity.too.many.keys':
      return {
        code: 'invalid_request',
        message: `The request body holds ${(err as Error).message} object keys, more than ${MAX_JSON_KEYS}; send fewer keys (an array of values costs less than an object of many keys).`,
        details: { maxKeys: MAX_JSON_KEYS },
      };
    case 'entity.proto.key':
      return {
        code: 'invalid_request',
        message:
          'The request body has an object key "__proto__", which cannot be kept as sent (JavaScript reads it as the prototype); rename the key.',
        details: {},
      };
    case 'entity.too.deep':
      return {
        code: 'invalid_request',
        message: `The request body nests objects and arrays more than ${MAX_JSON_DEPTH} levels deep; send flatter JSON.`,
        details: { maxDepth: MAX_JSON_DEPTH },
      };
    case 'encoding.failed':
      return {
        code: 'invalid_request',
        message: `The request body could not be decompressed as its Content-Encoding says (${(err as Error).message}); send it as encoded, or without Content-Encoding.`,
        details: {},
      };
    case 'media.unsupported':
      return {
        code: 'unsupported_media_type',
        message: `The request body must be JSON, declared as "Content-Type: application/json" (or a +json type); this request has ${(err as Error).message}.`,
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
  const given = value === undefined ? {} : value;
  const result = schema.safeParse(given);
  if (result.success) return result.data;
  // An array where an object was expected is said as a scalar there is (bodyParserFailure).
  if (Array.isArray(given) && result.error.issues.some((issue) => issue.path.length === 0)) {
    throw make({ code: 'invalid_request', message: notAnObject(what, 'an array'), details: {} });
  }
  const issues: Issue[] = result.error.issues.map((issue) => {
    const path = issue.path.map(String).join('.');
    // A field left out is said to be missing, not to be of the wrong kind ("qty must be an integer").
    const missing = issue.code === 'invalid_type' && issue.path.length > 0 && !hasPath(given, issue.path);
    return { path, message: missing ? `${path} is required` : issue.message };
  });
  // One value can fail two checks that say the same (too large for a safe integer and for the
  // field's own maximum): each is said once.
  const distinct = [...new Map(issues.map((issue) => [`${issue.path}\n${issue.message}`, issue])).values()];
  throw invalid(what, distinct, make);
}

/** The refusal of JSON that is not an object at the top (`kind`: `an array`, `a number`...). */
function notAnObject(what: string, kind: string): string {
  return `The ${what} is JSON, but ${kind} rather than an object; send a JSON object.`;
}

/** One 400 naming every issue of `what` (the request body, the query string...). */
function invalid(what: string, issues: Issue[], make: MakeServiceError): ServiceError {
  return make({
    code: 'invalid_request',
    message: `The ${what} is invalid: ${issues.map(describe).join('; ')}.`,
    details: { issues },
  });
}

/**
 * A query string's parameters through `schema`, after refusing every parameter given more than
 * once (express hands those over as arrays): each schema would otherwise say something of its
 * own about an array ("status must be pending, ...", "after must be a string"), none of them
 * that the parameter was repeated.
 */
export function parseQueryWith<T extends z.ZodType>(schema: T, query: unknown, make: MakeServiceError): z.infer<T> {
  const given = { ...(query as object) } as Record<string, unknown>;
  const repeated = Object.keys(given).filter((name) => Array.isArray(given[name]));
  if (repeated.length > 0) {
    const issues = repeated.map((name) => ({ path: name, message: `${name} is given more than once; give it once` }));
    throw invalid('query string', issues, make);
  }
  return parseWith(schema, given, 'query string', make);
}

/**
 * What a body refused by a strict JSON parser is, when it is JSON at all: `null`, a string, a
 * number or a boolean (a strict parser takes only an object or an array at the top).
 */
function scalarKind(body: unknown): string | undefined {
  if (typeof body !== 'string') return undefined;
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch {
    return undefined;
  }
  if (value === null) return 'null';
  if (typeof value === 'object') return undefined;
  return typeof value === 'string' ? 'a string' : typeof value === 'number' ? 'a number' : 'a boolean';
}

/** Whether `value` has an own property at `path` (an object's key, an array's index), at every step. */
function hasPath(value: unknown, path: ReadonlyArray<PropertyKey>): boolean {
  let at: unknown = value;
  for (const key of path) {
    if (at === null || typeof at !== 'object' || !Object.hasOwn(at, key)) return false;
    at = (at as Record<PropertyKey, unknown>)[key];
  }
  return true;
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
    res.on('finish', () => logAnswer(logger, req, res, started));
    next();
  };
}

/** requestLog's line for `req`, answered now, begun at `started` (process.hrtime.bigint()). */
export function logAnswer(logger: Logger, req: Request, res: Response, started: bigint): void {
  const status = res.statusCode;
  // A success is logged at debug, usually off: then its line is not even built.
  if (status < 400 && !logger.isLevelEnabled('debug')) return;
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  const code = answeredCodes.get(res);
  const entry = {
    method: req.method,
    path: req.path,
    status,
    ...(code ? { code } : {}),
    ms: Math.round(ms * 10) / 10,
  };
  if (status >= 500) logger.warn(entry, 'request failed');
  else if (status >= 400) logger.info(entry, 'request refused');
  else logger.debug(entry, 'request');
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
