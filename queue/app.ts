// The queue's HTTP adapter: parse each body with its schema, call the store, render JSON.
// Routes throw QueueError; one error handler renders every failure the same way.
import express, { type Request } from 'express';
import { pino, type Logger } from 'pino';
import type { z } from 'zod';
import {
  callerGone,
  edgeFailureOf,
  errorRenderer,
  jsonBody,
  parseQueryWith,
  parseWith,
  requireApiKey,
  unknownRoute,
} from '../platform/http-edge.js';
import { createRegistry, metricsRoute } from '../platform/metrics.js';
import { requestEdge, serviceApp } from '../platform/request-edge.js';
import { openApiRoute } from '../platform/openapi.js';
import { withRequestIds } from '../platform/request-id.js';
import type { Registry } from 'prom-client';
import { QueueError, unknownJobError } from './errors.js';
import { observeQueueStore } from './metrics.js';
import { queueOpenApi } from './openapi.js';
import {
  cancelBody,
  claimBody,
  enqueueBody,
  failBody,
  finishBody,
  finishesBody,
  heartbeatBody,
  jobIdParam,
  LIST_MAX_BYTES,
  listQuery,
  releaseBody,
  retryBody,
  toNewJob,
  verificationsBody,
  verifyBody,
} from './schemas.js';
import { ClaimWaiters } from './long-poll.js';
import { QueueUi } from './ui.js';
import type { QueueStore } from './store.js';
import { checkRequiredOptions, type OptionNames } from '../platform/option-names.js';

export interface QueueAppOptions {
  store: QueueStore;
  logger?: Logger;
  /** How often long-polling claims look again for jobs that become claimable by time alone. */
  repollMs?: number;
  /** The most long-polling claims waiting at once (default 512); one more is `503 too_many_waiters`. */
  maxClaimWaiters?: number;
  /** When set, every route but /healthz requires `Authorization: Bearer <apiKey>` (401 otherwise). */
  apiKey?: string | undefined;
  /** The registry GET /metrics serves; a fresh one by default. One app per registry. */
  metrics?: Registry;
}

/** An express app with long-polling claims waiting on it: `close()` answers them (204) at once. */
export type QueueApp = express.Express & { close(): void };

const QUEUE_APP_OPTION_NAMES: OptionNames<QueueAppOptions> = {
  store: true,
  logger: true,
  repollMs: true,
  maxClaimWaiters: true,
  apiKey: true,
  metrics: true,
};

export function createQueueApp(options: QueueAppOptions): QueueApp {
  checkRequiredOptions('createQueueApp', options, QUEUE_APP_OPTION_NAMES);
  const {
    store: storeIn,
    logger: loggerIn = pino({ level: 'silent' }),
    repollMs,
    maxClaimWaiters,
    apiKey,
    metrics = createRegistry('queue'),
  } = options;
  // Every line logged while a request is handled carries its reqId; every claim, finish and
  // refusal, whichever route makes it, is counted.
  const logger = withRequestIds(loggerIn);
  const store = observeQueueStore(storeIn, metrics, () => waiters.waiting);
  // Checked before anything is built: an empty key is a mistake, not "no key".
  const authorised = requireApiKey(apiKey, QueueError.fromEdge, 'queue');
  const waiters = new ClaimWaiters(store, { repollMs, maxWaiters: maxClaimWaiters });
  const ui = new QueueUi({ store });
  const app = serviceApp();
  app.use(requestEdge(metrics, logger));
  // The live page holds no data and is the same for everyone, so a browser loads it without a
  // header; what it shows comes from /ui/state, which needs the key like every other route.
  app.get('/ui', ui.page);
  // The key is checked before the body is read: the job listing shows every lease's token.
  app.use(authorised);
  // Each route reads its body once it is matched, so an unknown route or method is 404 whatever
  // its body or content type, and costs no parsing.
  const json = jsonBody();

  app.get('/healthz', json, (_req, res) => {
    res.json({ ok: true });
  });

  app.post('/jobs', json, async (req, res) => {
    const body = parse(enqueueBody, req.body);
    const { job, created } = await store.enqueue(toNewJob(body, req.body));
    logger.info({ jobId: job.id, qty: job.qty, created }, created ? 'enqueued' : 'enqueue repeated');
    res.status(created ? 201 : 200).json({ job });
  });

  app.post('/claims', json, async (req, res) => {
    const body = parse(claimBody, req.body);
    // A long poll stops waiting when its caller hangs up, so no lease is made for nobody.
    const caller = callerGone(res);
    let leases;
    try {
      leases = await waiters.claim(body.owner, body.leaseMs, body.max ?? 1, body.waitMs, caller.signal);
    } finally {
      caller.done();
    }
    for (const lease of leases) {
      ui.claimed(lease);
      logger.info({ jobId: lease.id, owner: lease.owner, token: lease.token, leaseUntil: lease.leaseUntil }, 'claimed');
    }
    if (leases.length === 0) res.status(204).end();
    else if (body.max === undefined) res.json({ lease: leases[0] });
    else res.json({ leases });
  });

  app.post('/jobs/:id/heartbeat', json, async (req, res) => {
    const id = jobId(req);
    const body = parse(heartbeatBody, req.body);
    const lease = await store.heartbeat(id, body, body.leaseMs);
    logger.debug({ jobId: id, owner: body.owner, token: body.token, leaseUntil: lease.leaseUntil }, 'renewed');
    res.json({ lease });
  });

  app.post('/jobs/:id/finish', json, async (req, res) => {
    const id = jobId(req);
    const body = parse(finishBody, req.body);
    const presented = { owner: body.owner, token: body.token };
    if (!body.next) {
      const job = await store.finish(id, presented, body.result ?? null);
      ui.done(job);
      logger.info({ jobId: id, owner: body.owner, token: body.token }, 'finished');
      res.json({ job });
      return;
    }
    const leaseMs = body.next === true ? undefined : body.next.leaseMs;
    const { job, next } = await store.finishAndClaim(id, presented, body.result ?? null, leaseMs);
    ui.done(job);
    if (next) ui.claimed(next);
    logger.info({ jobId: id, owner: body.owner, token: body.token }, 'finished');
    if (next)
      logger.info({ jobId: next.id, owner: next.owner, token: next.token, leaseUntil: next.leaseUntil }, 'claimed');
    res.json({ job, next });
  });

  // Several finishes of one owner in one request and one transaction; each answered as its own
  // POST /jobs/:id/finish would have been, its error's status inside it.
  app.post('/finishes', json, async (req, res) => {
    const body = parse(finishesBody, req.body);
    const next = body.next ? { leaseMs: body.next === true ? undefined : body.next.leaseMs } : undefined;
    const items = body.finishes.map(({ id, token, result }) => ({ id, token, result: result ?? null }));
    const answer = await store.finishMany(body.owner, items, next);
    const results = answer.results.map((result, i) => {
      const { id, token } = items[i]!;
      if (result instanceof QueueError) {
        ui.refused('finish', id, result);
        const { error } = result.toJSON();
        return { error: { ...error, status: result.status } };
      }
      ui.done(result);
      logger.info({ jobId: id, owner: body.owner, token }, 'finished');
      return { job: result };
    });
    for (const lease of answer.next) {
      ui.claimed(lease);
      logger.info({ jobId: lease.id, owner: lease.owner, token: lease.token, leaseUntil: lease.leaseUntil }, 'claimed');
    }
    res.json(next ? { results, next: answer.next } : { results });
  });

  app.post('/jobs/:id/fail', json, async (req, res) => {
    const id = jobId(req);
    const body = parse(failBody, req.body);
    const job = await store.fail(id, body, body.error, body.retryInMs);
    logger.info({ jobId: id, owner: body.owner, token: body.token, status: job.status }, 'failed');
    res.json({ job });
  });

  app.post('/jobs/:id/verify', json, async (req, res) => {
    const id = jobId(req);
    const body = parse(verifyBody, req.body);
    res.json({ lease: await store.verify(id, body) });
  });

  // The job lifecycle: the holder hands a job back; an operator cancels a live job or retries a dead one.
  app.post('/jobs/:id/release', json, async (req, res) => {
    const id = jobId(req);
    const body = parse(releaseBody, req.body);
    const job = await store.release(id, body);
    logger.info({ jobId: id, owner: body.owner, token: body.token }, 'released');
    res.json({ job });
  });

  app.post('/jobs/:id/cancel', json, async (req, res) => {
    const id = jobId(req);
    const body = parse(cancelBody, req.body);
    const job = await store.cancel(id, body.reason);
    logger.info({ jobId: id, owner: job.owner, token: job.token, deadReason: job.deadReason }, 'cancelled');
    res.json({ job });
  });

  app.post('/jobs/:id/retry', json, async (req, res) => {
    const id = jobId(req);
    const body = parse(retryBody, req.body);
    const job = await store.retry(id, body);
    logger.info({ jobId: id, token: job.token, runAt: job.runAt, maxAttempts: job.maxAttempts }, 'retried');
    res.json({ job });
  });

  // Several lease checks in one request, their rows read by one statement: the gateway's coalesced verify.
  app.post('/verifications', json, async (req, res) => {
    const body = parse(verificationsBody, req.body);
    const answers = await store.verifyMany(body.leases);
    answers.forEach((answer, i) => ui.refused('verify', body.leases[i]!.id, answer));
    res.json({
      results: answers.map((answer) => (answer instanceof QueueError ? answer.toJSON() : { lease: answer })),
    });
  });

  app.get('/jobs/:id', json, async (req, res) => {
    const id = jobId(req);
    const job = await store.get(id);
    if (!job) throw unknownJobError(id);
    res.json({ job });
  });

  app.get('/jobs', json, async (req, res) => {
    const { lean, ...query } = parseQueryWith(listQuery, req.query, QueueError.fromEdge);
    res.json(lean ? await store.listSummaries(query) : await store.listPage({ ...query, maxBytes: LIST_MAX_BYTES }));
  });

  app.get('/stats', json, async (_req, res) => {
    res.json(await store.stats());
  });

  app.use(ui.router(json));
  app.get('/metrics', json, metricsRoute(metrics));
  app.get(
    '/openapi.json',
    json,
    openApiRoute(() => queueOpenApi({ apiKey: apiKey !== undefined })),
  );
  app.use(unknownRoute(QueueError.fromEdge, 'queue', 'docs/queue.md lists its API'));
  app.use(ui.recordRefusals);
  app.use(errorRenderer(toQueueError, logger));
  return Object.assign(app, { close: () => waiters.close() });
}

function jobId(req: Request): string {
  return parse(jobIdParam, req.params.id, 'job id in the path');
}

function parse<T extends z.ZodType>(schema: T, value: unknown, what = 'request body'): z.infer<T> {
  return parseWith(schema, value, what, QueueError.fromEdge);
}

/** The stores already speak QueueError, a busy or unreachable database included. */
function toQueueError(err: unknown): QueueError {
  return err instanceof QueueError ? err : QueueError.fromEdge(edgeFailureOf(err, 'queue'));
}
