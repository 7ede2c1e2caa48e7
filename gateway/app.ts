// The gateway's HTTP adapter: parse `POST /send` with its schema, run the send, render JSON.
// Routes throw GatewayError; one error handler renders every failure the same way.
import express, { type ErrorRequestHandler, type Express, type Response } from 'express';
import type { Logger } from 'pino';
import type { z } from 'zod';
import { QueueClient } from '../queue/client.js';
import { GatewayError } from './errors.js';
import { createForwarder } from './forwarder.js';
import { resolveGatewayOptions, type GatewayOptions } from './options.js';
import { sendBody } from './schemas.js';
import { createSend, type SendRequest } from './send.js';

/** An express app that owns keep-alive connection pools: `close()` releases them. */
export type GatewayApp = Express & { close(): void };

export function createGatewayApp(options: GatewayOptions): GatewayApp {
  const resolved = resolveGatewayOptions(options);
  const { logger } = resolved;
  const queue = new QueueClient(resolved.queueUrl.href, { timeoutMs: resolved.queueTimeoutMs });
  const forwarder = createForwarder({ receiverUrl: resolved.receiverUrl, secret: resolved.secret, now: () => resolved.clock.now() });
  const send = createSend({ queue, forwarder, options: resolved, logger });

  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.use(express.json({ limit: '1mb', type: () => true }));

  app.get('/healthz', (_req, res) => {
    res.json({ ok: true });
  });

  app.post('/send', async (req, res) => {
    const body = parse(sendBody, req.body);
    const started = performance.now();
    const caller = callerGone(res);
    const request: SendRequest = body;
    const base = { jobId: request.jobId, owner: request.owner, token: request.token };
    try {
      const result = await send(request, caller.signal);
      const ms = elapsed(started);
      logger.info({ ...base, outcome: result.outcome, attempts: result.attempts, ms }, 'forwarded');
      res.set('Leasehold-Attempts', String(result.attempts));
      if (result.outcome === 'duplicate') res.set('Idempotent-Replayed', 'true');
      res.status(200).json({ outcome: result.outcome, effect: result.effect });
    } catch (err) {
      const ms = elapsed(started);
      if (caller.signal.aborted) {
        logger.info({ ...base, ms }, 'send abandoned: the caller closed the connection');
        return;
      }
      if (err instanceof GatewayError) {
        const { reason, attempts = 0 } = err.details;
        const entry = { ...base, outcome: err.code, status: err.status, ...(reason ? { reason } : {}), attempts, ms };
        if (err.status >= 500) logger.warn(entry, err.message);
        else logger.info(entry, 'refused');
      }
      throw err;
    } finally {
      caller.done();
    }
  });

  app.use((req, _res) => {
    throw new GatewayError('not_found', `There is no ${req.method} ${req.path} on the gateway; it serves POST /send and GET /healthz.`);
  });
  app.use(errorHandler(logger));

  return Object.assign(app, {
    close() {
      queue.close();
      forwarder.close();
    },
  });
}

/** An AbortSignal that fires when the caller hangs up before the answer, so retries stop. */
function callerGone(res: Response): { signal: AbortSignal; done(): void } {
  const controller = new AbortController();
  const onClose = () => {
    if (!res.writableFinished) controller.abort(new Error('the caller closed the connection'));
  };
  res.on('close', onClose);
  return { signal: controller.signal, done: () => res.off('close', onClose) };
}

function elapsed(started: number): number {
  return Math.round((performance.now() - started) * 10) / 10;
}

function parse<T extends z.ZodType>(schema: T, value: unknown): z.infer<T> {
  const result = schema.safeParse(value ?? {});
  if (result.success) return result.data;
  const issues = result.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message }));
  const first = issues[0];
  throw new GatewayError('invalid_request', `Invalid request body: ${first?.message ?? 'malformed'}.`, { issues });
}

const LOGGED_HERE: ReadonlySet<string> = new Set(['invalid_request', 'payload_too_large', 'not_found']);

/** Renders every error as `{error: {code, message, ...details}}`; unknown errors are a logged 500. */
function errorHandler(logger: Logger): ErrorRequestHandler {
  return (err, req, res, _next) => {
    const error = toGatewayError(err);
    // Sends log their own outcome; this logs what never reached a send.
    if (error.code === 'internal') logger.error({ err, method: req.method, path: req.path }, 'unexpected error');
    else if (LOGGED_HERE.has(error.code)) logger.info({ code: error.code, method: req.method, path: req.path, status: error.status }, 'refused');
    if (res.headersSent) return;
    res.status(error.status).json(error.toJSON());
  };
}

function toGatewayError(err: unknown): GatewayError {
  if (err instanceof GatewayError) return err;
  const type = (err as { type?: string } | null)?.type;
  if (type === 'entity.too.large') {
    return new GatewayError('payload_too_large', 'The request body is larger than 1 MiB; send {jobId, owner, token, qty} only.', {
      limitBytes: 1024 * 1024,
    });
  }
  if (type === 'entity.parse.failed') {
    return new GatewayError('invalid_request', 'The request body is not valid JSON; send a JSON object {jobId, owner, token, qty}.');
  }
  if (type === 'encoding.unsupported' || type === 'charset.unsupported') {
    return new GatewayError('invalid_request', 'The request body must be UTF-8 JSON.');
  }
  return new GatewayError('internal', 'The gateway failed unexpectedly; the error is in its log. Send again.');
}
