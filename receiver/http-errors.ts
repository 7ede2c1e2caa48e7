// The receiver's one error middleware: turns whatever a handler threw into the contract's
// `{error: {code, message, ...details}}`, and logs what is not the caller's fault.
import type { ErrorRequestHandler, RequestHandler } from 'express';
import type { Logger } from 'pino';
import { ReceiverError } from './errors.js';

const ONE_MIB = 1024 * 1024;

/**
 * Body-parser failures (they carry a `type`) as ReceiverErrors; stores already throw their own
 * (`busy` for a database that stays locked or unreachable). Undefined for anything else.
 */
export function toReceiverError(err: unknown): ReceiverError | undefined {
  if (err instanceof ReceiverError) return err;
  const type = (err as { type?: unknown } | null)?.type;
  switch (type) {
    case 'entity.too.large':
      return new ReceiverError(
        'payload_too_large',
        `The request body is larger than 1 MiB (${ONE_MIB} bytes); send a smaller body.`,
        { limitBytes: ONE_MIB },
      );
    case 'entity.parse.failed':
      return new ReceiverError('invalid_request', 'The request body is not valid JSON; send a JSON object.');
    case 'encoding.unsupported':
    case 'charset.unsupported':
      return new ReceiverError(
        'unsupported_media_type',
        'The request body uses an encoding or charset the receiver cannot read; send UTF-8 JSON.',
      );
    case 'request.aborted':
    case 'request.size.invalid':
      return new ReceiverError('invalid_request', 'The request body ended before its declared length; send it again.');
  }
  return undefined;
}

export function receiverErrors(logger: Logger): ErrorRequestHandler {
  return (err, req, res, next) => {
    if (res.headersSent) return next(err);
    let error = toReceiverError(err);
    if (!error) {
      logger.error({ err, method: req.method, path: req.path }, 'unexpected error');
      error = new ReceiverError('internal_error', 'The receiver failed unexpectedly; retry, and check its log if it persists.');
    } else if (error.status >= 500 && error.code !== 'injected_fault') {
      logger.error({ err, code: error.code, method: req.method, path: req.path }, error.message);
    } else {
      logger.warn({ code: error.code, method: req.method, path: req.path }, error.message);
    }
    res.status(error.status).json(error.toBody());
  };
}

/** The last route: anything not matched above is an unknown route. */
export const unknownRoute: RequestHandler = (req, _res, next) => {
  next(new ReceiverError('not_found', `There is no route ${req.method} ${req.path}; see the receiver's README for its routes.`));
};
