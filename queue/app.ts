// The queue's HTTP adapter: parse each body with its schema, call the store, render JSON.
// Routes throw QueueError; one error handler renders every failure the same way.
import express, { type ErrorRequestHandler, type Request, type RequestHandler } from 'express';
import type { Logger } from 'pino';
import { z } from 'zod';
import { QueueError, unknownJobError } from './errors.js';
import {
  claimBody,
  enqueueBody,
  failBody,
  finishBody,
  heartbeatBody,
  jobIdParam,
  listQuery,
  toNewJob,
  verifyBody,
} from './schemas.js';
import type { QueueStore } from './store.js';

export interface QueueAppOptions {
  store: QueueStore;
  logger?: Logger;
}

export function createQueueApp({ store, logger }: QueueAppOptions): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.use(express.json({ limit: '1mb', type: () => true }));
  if (logger) app.use(requestLog(logger));

  app.get('/healthz', (_req, res) => {
    res.json({ ok: true });
  });

  app.post('/jobs', async (req, res) => {
    const body = parse(enqueueBody, req.body, 'body');
    const { job, created } = await store.enqueue(toNewJob(body, req.body));
    logger?.info({ job: job.id, qty: job.qty, created }, created ? 'enqueued' : 'enqueue repeated');
    res.status(created ? 201 : 200).json({ job });
  });

  app.post('/claims', async (req, res) => {
    const body = parse(claimBody, req.body, 'body');
    const lease = await store.claim(body.owner, body.leaseMs);
    if (!lease) {
      res.status(204).end();
      return;
    }
    logger?.info({ job: lease.id, owner: lease.owner, token: lease.token, leaseUntil: lease.leaseUntil }, 'claimed');
    res.json({ lease });
  });

  app.post('/jobs/:id/heartbeat', async (req, res) => {
    const id = jobId(req);
    const body = parse(heartbeatBody, req.body, 'body');
    const lease = await store.heartbeat(id, body, body.leaseMs);
    logger?.debug({ job: id, owner: body.owner, token: body.token, leaseUntil: lease.leaseUntil }, 'renewed');
    res.json({ lease });
  });

  app.post('/jobs/:id/finish', async (req, res) => {
    const id = jobId(req);
    const body = parse(finishBody, req.body, 'body');
    const job = await store.finish(id, body, body.result ?? null);
    logger?.info({ job: id, owner: body.owner, token: body.token }, 'finished');
    res.json({ job });
  });

  app.post('/jobs/:id/fail', async (req, res) => {
    const id = jobId(req);
    const body = parse(failBody, req.body, 'body');
    const job = await store.fail(id, body, body.error, body.retryInMs);
    logger?.info({ job: id, owner: body.owner, token: body.token, status: job.status }, 'failed');
    res.json({ job });
  });

  app.post('/jobs/:id/verify', async (req, res) => {
    const id = jobId(req);
    const body = parse(verifyBody, req.body, 'body');
    res.json({ lease: await store.verify(id, body) });
  });

  app.get('/jobs/:id', async (req, res) => {
    const id = jobId(req);
    const job = await store.get(id);
    if (!job) throw unknownJobError(id);
    res.json({ job });
  });

  app.get('/jobs', async (req, res) => {
    const query = parse(listQuery, { ...req.query }, 'query');
    res.json({ jobs: await store.list(query) });
  });

  app.get('/stats', async (_req, res) => {
    res.json(await store.stats());
  });

  app.use((req, _res) => {
    throw new QueueError('not_found', `There is no ${req.method} ${req.path} on the queue. See the README for the API.`);
  });
  app.use(errorHandler(logger));
  return app;
}

function jobId(req: Request): string {
  return parse(jobIdParam, req.params.id, 'path');
}

function parse<T extends z.ZodType>(schema: T, value: unknown, where: string): z.infer<T> {
  const result = schema.safeParse(value ?? {});
  if (result.success) return result.data;
  const issues = result.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message }));
  const first = issues[0];
  const at = first?.path ? `${first.path}: ` : '';
  throw new QueueError('invalid_request', `Invalid request ${where}: ${at}${first?.message ?? 'malformed'}.`, {
    issues,
  });
}

function requestLog(logger: Logger): RequestHandler {
  return (req, res, next) => {
    const started = process.hrtime.bigint();
    res.on('finish', () => {
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      const entry = { method: req.method, path: req.path, status: res.statusCode, ms: Math.round(ms * 10) / 10 };
      if (res.statusCode >= 500) logger.error(entry, 'request failed');
      else if (res.statusCode >= 400) logger.info(entry, 'request refused');
      else logger.debug(entry, 'request');
    });
    next();
  };
}

/** Renders every error as `{error: {code, message, ...details}}`; unknown errors are a logged 500. */
function errorHandler(logger: Logger | undefined): ErrorRequestHandler {
  return (err, _req, res, _next) => {
    const error = toQueueError(err);
    if (error.status >= 500) logger?.error({ err }, 'unexpected error');
    res.status(error.status).json(error.toJSON());
  };
}

/**
 * The stores already speak QueueError, a busy or unreachable database included; what is left
 * is body-parser failures (HTTP's own, recognised by their `type`) and the unexpected.
 */
function toQueueError(err: unknown): QueueError {
  if (err instanceof QueueError) return err;
  const type = (err as { type?: string } | null)?.type;
  if (type === 'entity.too.large') {
    return new QueueError('payload_too_large', 'The request body is larger than 1 MiB. Send a smaller payload.');
  }
  if (type === 'entity.parse.failed') {
    return new QueueError('invalid_request', 'The request body is not valid JSON. Send a JSON object.');
  }
  if (type === 'encoding.unsupported' || type === 'charset.unsupported') {
    return new QueueError('invalid_request', 'The request body must be UTF-8 JSON.');
  }
  return new QueueError('internal', 'The queue failed unexpectedly; the error is in its log. Retry the request.');
}
