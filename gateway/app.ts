// The gateway's HTTP adapter: parse `POST /send` (or `POST /sends`, several at once) with its
// schema, run each send, render JSON. `POST /send` throws GatewayError to the one error handler;
// `POST /sends` renders each send's error inside its answer, the same way.
import type { Express } from 'express';
import type { Logger } from 'pino';
import {
  callerGone,
  edgeFailureOf,
  errorRenderer,
  jsonBody,
  parseWith,
  requireApiKey,
  unknownRoute,
} from '../platform/http-edge.js';
import { createRegistry, metricsRoute } from '../platform/metrics.js';
import { requestEdge, serviceApp } from '../platform/request-edge.js';
import { openApiRoute } from '../platform/openapi.js';
import { withRequestIds } from '../platform/request-id.js';
import { QueueClient } from '../queue/client.js';
import { GatewayError } from './errors.js';
import { createForwarder } from './forwarder.js';
import { gatewayMetrics, upstreamTimes } from './metrics.js';
import { gatewayOpenApi } from './openapi.js';
import { GATEWAY_OPTION_NAMES, resolveGatewayOptions, type GatewayOptions } from './options.js';
import { sendBody, sendsBody } from './schemas.js';
import { createSend, type SendResult } from './send.js';
import { DEFAULT_DOWNSTREAM, type SendRequest } from './types.js';
import { CoalescingVerifier, timedVerifyApi } from './verifier.js';
import { checkRequiredOptions } from '../platform/option-names.js';

/** An express app that owns keep-alive connection pools: `close()` releases them. */
export type GatewayApp = Express & { close(): void };

export function createGatewayApp(options: GatewayOptions): GatewayApp {
  checkRequiredOptions('createGatewayApp', options, GATEWAY_OPTION_NAMES);
  const resolved = resolveGatewayOptions(options);
  // Every line logged while a send is handled carries its reqId, which the queue and the receiver get too.
  const logger = withRequestIds(resolved.logger);
  const metrics = options.metrics ?? createRegistry('gateway');
  const waited = upstreamTimes(metrics);
  const queue = new QueueClient(resolved.queueUrl.href, {
    timeoutMs: resolved.queueTimeoutMs,
    apiKey: resolved.apiKey,
  });
  const downstreams = new Map(
    [...resolved.downstreams].map(([name, downstream]) => [
      name,
      {
        forwarder: createForwarder({
          endpoint: downstream.url,
          secret: downstream.secret,
          now: () => resolved.clock.now(),
          logger,
          observe: (seconds) => waited({ call: 'forward', upstream: name }, seconds),
        }),
        signed: downstream.secret !== undefined,
      },
    ]),
  );
  // Sends that overlap share their lease checks: one queue request for all that wait.
  const verifier = new CoalescingVerifier(
    timedVerifyApi(queue, (seconds) => waited({ call: 'lease_check', upstream: 'queue' }, seconds)),
    logger,
  );
  const send = createSend({ queue: verifier, downstreams, options: resolved, logger });
  const sends = gatewayMetrics(
    metrics,
    () => verifier.counts,
    () => [...downstreams].map(([name, { forwarder }]) => ({ downstream: name, ...forwarder.counts })),
  );

  const app = serviceApp();
  app.use(requestEdge(metrics, logger));
  app.use(requireApiKey(resolved.apiKey, GatewayError.fromEdge, 'gateway'));
  // Each route reads its body once it is matched, so an unknown route or method is 404 whatever
  // its body or content type, and costs no parsing.
  const json = jsonBody();

  app.get('/healthz', json, (_req, res) => {
    res.json({ ok: true });
  });

  /**
   * One send, counted and logged as the gateway's answer to it: the outcome, the GatewayError it
   * was refused with (anything else is `internal`, logged as unexpected), or `abandoned` when its
   * caller hung up. Both routes answer from it; `POST /send` throws the error to the renderer.
   * A refusal is one line with its cause in it (the attempts' `failures`, the upstream's answer,
   * the error behind it as `err`): at `error` when it carries an error behind it, as the error
   * renderer logs such a 5xx in every service, else `warn` for a 5xx and `info` for a 4xx. The
   * request line stays the access log's.
   */
  const sendOne = async (request: SendRequest, signal: AbortSignal): Promise<Judged> => {
    const started = performance.now();
    const base = { jobId: request.jobId, owner: request.owner, token: request.token };
    // Counted by downstream only when it names one the gateway has: a caller cannot add series at will.
    const downstream = downstreams.has(request.to ?? DEFAULT_DOWNSTREAM)
      ? (request.to ?? DEFAULT_DOWNSTREAM)
      : undefined;
    const where = {
      ...(downstream !== undefined ? { downstream } : {}),
      ...(request.key !== undefined ? { key: request.key } : {}),
    };
    try {
      const result = await send(request, signal);
      const ms = elapsed(started);
      sends.sent(result.outcome, result.attempts, downstream);
      logger.info({ ...base, ...where, outcome: result.outcome, attempts: result.attempts, ms }, 'forwarded');
      return { kind: 'sent', result };
    } catch (err) {
      const ms = elapsed(started);
      if (signal.aborted) {
        sends.sent('abandoned', 0, downstream);
        logger.info({ ...base, ...where, ms }, 'send abandoned: the caller closed the connection');
        return { kind: 'abandoned' };
      }
      if (err instanceof GatewayError) {
        const { reason, attempts = 0, failures, upstream } = err.details;
        sends.sent(err.code, Number(attempts), downstream);
        const entry = {
          ...base,
          ...where,
          outcome: err.code,
          status: err.status,
          ...(reason ? { reason } : {}),
          attempts,
          ...(failures ? { failures } : {}),
          ...(upstream ? { upstream } : {}),
          ...(err.cause !== undefined ? { err: err.cause } : {}),
          ms,
        };
        if (err.status >= 500 && err.cause !== undefined) logger.error(entry, err.message);
        else if (err.status >= 500) logger.warn(entry, err.message);
        else logger.info(entry, 'refused');
        return { kind: 'refused', err: withoutCause(err) };
      }
      sends.sent('internal', 0, downstream);
      return { kind: 'refused', err };
    }
  };

  app.post('/send', json, async (req, res) => {
    const body = parseWith(sendBody, req.body, 'request body', GatewayError.fromEdge);
    const caller = callerGone(res);
    try {
      const judged = await sendOne(body, caller.signal);
      if (judged.kind === 'abandoned') return;
      if (judged.kind === 'refused') throw judged.err;
      const { result } = judged;
      res.set('Leasehold-Attempts', String(result.attempts));
      if (result.outcome === 'duplicate') res.set('Idempotent-Replayed', 'true');
      res.status(200).json({ outcome: result.outcome, effect: result.effect });
    } finally {
      caller.done();
    }
  });

  // Several sends in one request, each judged as its own POST /send would be, all at once: their
  // lease checks and forwards share requests. One answer per send, its status inside it.
  app.post('/sends', json, async (req, res) => {
    const body = parseWith(sendsBody, req.body, 'request body', GatewayError.fromEdge);
    const caller = callerGone(res);
    try {
      const each = signalPerSend(caller.signal, body.sends.length);
      try {
        const judged = await Promise.all(body.sends.map((request, i) => sendOne(request, each.signals[i]!)));
        if (caller.signal.aborted) return;
        res.json({ results: judged.map((one) => sendResult(one, logger)) });
      } finally {
        each.done();
      }
    } finally {
      caller.done();
    }
  });

  app.get('/metrics', json, metricsRoute(metrics));
  app.get(
    '/openapi.json',
    json,
    openApiRoute(() => gatewayOpenApi({ apiKey: resolved.apiKey !== undefined })),
  );

  app.use(
    unknownRoute(
      GatewayError.fromEdge,
      'gateway',
      'it serves POST /send, POST /sends, GET /healthz, GET /metrics and GET /openapi.json',
    ),
  );
  app.use(errorRenderer(toGatewayError, logger));

  return Object.assign(app, {
    close() {
      queue.close();
      for (const { forwarder } of downstreams.values()) forwarder.close();
    },
  });
}

/**
 * A signal of its own for each of `count` sends, all aborted when `caller` is, through one
 * listener on it. Each send's lease check, forward and backoff listen on its own signal: on the
 * caller's one signal, a batch of 11 sends or more would pass Node's limit of 10 abort listeners
 * and print a MaxListenersExceededWarning, though each is removed once its step is done.
 */
function signalPerSend(caller: AbortSignal, count: number): { signals: AbortSignal[]; done(): void } {
  const controllers = Array.from({ length: count }, () => new AbortController());
  const signals = controllers.map((controller) => controller.signal);
  if (caller.aborted) {
    for (const controller of controllers) controller.abort(caller.reason);
    return { signals, done: () => {} };
  }
  const onAbort = () => {
    for (const controller of controllers) controller.abort(caller.reason);
  };
  caller.addEventListener('abort', onAbort, { once: true });
  return { signals, done: () => caller.removeEventListener('abort', onAbort) };
}

/** How one send ended, as the routes answer it. */
type Judged = { kind: 'sent'; result: SendResult } | { kind: 'refused'; err: unknown } | { kind: 'abandoned' };

/** One entry of `POST /sends`'s answer: the status and body `POST /send` would have answered. */
function sendResult(judged: Judged, logger: Logger) {
  // Only a hung-up caller abandons a send, and its request is answered nothing.
  if (judged.kind === 'abandoned') throw new Error('an abandoned send has no answer');
  if (judged.kind === 'sent') {
    const { outcome, effect, attempts } = judged.result;
    return { status: 200, attempts, body: { outcome, effect } };
  }
  const error = toGatewayError(judged.err);
  // As the error renderer does for a single send: an error the gateway did not expect is logged.
  if (error !== judged.err) logger.error({ err: judged.err, code: error.code, path: '/sends' }, 'unexpected error');
  const attempts = Number(error.details.attempts ?? 0);
  return { status: error.status, attempts, body: error.toJSON() };
}

/**
 * The refusal as the routes answer it, once the send's line has logged its cause: the same code,
 * status, message and details, without the cause, which the error renderer would log again on a
 * line of its own.
 */
function withoutCause(err: GatewayError): GatewayError {
  return err.cause === undefined ? err : new GatewayError(err.code, err.message, err.details, err.status);
}

function elapsed(started: number): number {
  return Math.round((performance.now() - started) * 10) / 10;
}

function toGatewayError(err: unknown): GatewayError {
  return err instanceof GatewayError ? err : GatewayError.fromEdge(edgeFailureOf(err, 'gateway'));
}
