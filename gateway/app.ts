// The gateway's HTTP adapter: parse `POST /send` with its schema, run the send, render JSON.
// Routes throw GatewayError; one error handler renders every failure the same way.
import express, { type Express } from 'express';
import {
  callerGone,
  edgeFailureOf,
  errorRenderer,
  jsonBody,
  parseWith,
  requestLog,
  unknownRoute,
} from '../platform/http-edge.js';
import { QueueClient } from '../queue/client.js';
import { GatewayError } from './errors.js';
import { createForwarder } from './forwarder.js';
import { resolveGatewayOptions, type GatewayOptions } from './options.js';
import { sendBody } from './schemas.js';
import { createSend } from './send.js';
import type { SendRequest } from './types.js';
import { CoalescingVerifier } from './verifier.js';

/** An express app that owns keep-alive connection pools: `close()` releases them. */
export type GatewayApp = Express & { close(): void };

export function createGatewayApp(options: GatewayOptions): GatewayApp {
  const resolved = resolveGatewayOptions(options);
  const { logger } = resolved;
  const queue = new QueueClient(resolved.queueUrl.href, { timeoutMs: resolved.queueTimeoutMs });
  const forwarder = createForwarder({
    receiverUrl: resolved.receiverUrl,
    secret: resolved.secret,
    now: () => resolved.clock.now(),
  });
  // Sends that overlap share their lease checks: one queue request for all that wait.
  const send = createSend({ queue: new CoalescingVerifier(queue), forwarder, options: resolved, logger });

  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.use(jsonBody());
  app.use(requestLog(logger));

  app.get('/healthz', (_req, res) => {
    res.json({ ok: true });
  });

  app.post('/send', async (req, res) => {
    const body = parseWith(sendBody, req.body, 'request body', GatewayError.fromEdge);
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

  app.use(unknownRoute(GatewayError.fromEdge, 'gateway', 'it serves POST /send and GET /healthz'));
  app.use(errorRenderer(toGatewayError, logger));

  return Object.assign(app, {
    close() {
      queue.close();
      forwarder.close();
    },
  });
}

function elapsed(started: number): number {
  return Math.round((performance.now() - started) * 10) / 10;
}

function toGatewayError(err: unknown): GatewayError {
  return err instanceof GatewayError ? err : GatewayError.fromEdge(edgeFailureOf(err, 'gateway'));
}
