// Request ids: each request takes its X-Request-Id (or a new one), answers with it, and every
// log line written while it is handled carries it as `reqId`, whichever module writes the line.
// Calls a service makes to another while handling a request pass the id on (exchange.ts).
import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import { pino, type Logger } from 'pino';

export const REQUEST_ID_HEADER = 'X-Request-Id';

/** One id: what fits a log field and a header without quoting. */
const ONE_ID = /^[A-Za-z0-9._:@/+=-]{1,128}$/;
/** A batch of lease checks carries the ids of every send it serves, comma-separated. */
const MAX_IDS = 100;

const current = new AsyncLocalStorage<string>();

/** The id of the request being handled here, or undefined outside any request. */
export function currentRequestId(): string | undefined {
  return current.getStore();
}

/** `value` when it is a usable request id (or a comma-separated list of them), else undefined. */
export function acceptedRequestId(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  const ids = value.split(',');
  return ids.length <= MAX_IDS && ids.every((id) => ONE_ID.test(id)) ? value : undefined;
}

/**
 * The request id of one request: the caller's X-Request-Id when usable, else a new UUID, set on
 * the answer and current while `next` runs (platform/request-edge.ts calls it first).
 */
export function runWithRequestId(req: Request, res: Response, next: NextFunction): void {
  const sent = req.headers['x-request-id'];
  const id = (typeof sent === 'string' ? acceptedRequestId(sent) : undefined) ?? randomUUID();
  res.setHeader(REQUEST_ID_HEADER, id);
  current.run(id, next);
}

/** Runs `work` as part of the request `id` (a body read by a stream loses the request's context). */
export function withRequestId<T>(id: string | undefined, work: () => T): T {
  return id === undefined ? work() : current.run(id, work);
}

type LogFormatter = (object: Record<string, unknown>) => Record<string, unknown>;

/**
 * `logger` with `reqId` added to every line written during a request; lines that set their
 * own `reqId` keep it. A logger wrapped twice adds it once.
 */
export function withRequestIds(logger: Logger): Logger {
  const formatters = (logger as unknown as Record<symbol, { log?: LogFormatter } | undefined>)[
    pino.symbols.formattersSym
  ];
  const parent = formatters?.log;
  return logger.child(
    {},
    {
      formatters: {
        log(object: object) {
          const formatted = parent ? parent(object as Record<string, unknown>) : object;
          const reqId = current.getStore();
          return reqId === undefined || 'reqId' in formatted ? formatted : { reqId, ...formatted };
        },
      },
    },
  );
}
