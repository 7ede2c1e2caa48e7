// The receiver's express app: POST /effects through the fencedEffects router, the read routes,
// test-mode admin routes, and the one error middleware.
import type { Express } from 'express';
import { pino, type Logger } from 'pino';
import { adminRoutes } from './admin.js';
import { ReceiverError } from './errors.js';
import type { FaultController } from './faults.js';
import { parseWith, unknownRoute } from '../platform/http-edge.js';
import {
  effectCursorText,
  effectQuery,
  effectsQuery,
  jobIdParam,
  journalQuery,
  parseQuery,
  readPage,
} from './listings.js';
import { createRegistry, metricsRoute } from '../platform/metrics.js';
import { requestEdge, serviceApp } from '../platform/request-edge.js';
import { openApiRoute } from '../platform/openapi.js';
import { withRequestIds } from '../platform/request-id.js';
import type { Registry } from 'prom-client';
import { effectMetrics } from './metrics.js';
import { fencedEffects, receiverErrors } from './middleware.js';
import { receiverOpenApi } from './openapi.js';
import { systemClock, type Clock } from './rules.js';
import type { EffectStore } from './store.js';
import { checkRequiredOptions, type OptionNames } from '../platform/option-names.js';

export interface ReceiverAppOptions<Tx> {
  store: EffectStore<Tx>;
  clock?: Clock;
  /** Requires a valid Leasehold-Signature on POST /effects. */
  secret?: string | undefined;
  logger?: Logger;
  /** Test mode: faults apply to POST /effects, and /admin/faults and /admin/reset exist. */
  faults?: FaultController;
  /** The registry GET /metrics serves; a fresh one by default. One app per registry. */
  metrics?: Registry;
}

const RECEIVER_APP_OPTION_NAMES: OptionNames<ReceiverAppOptions<unknown>> = {
  store: true,
  clock: true,
  secret: true,
  logger: true,
  faults: true,
  metrics: true,
};

export function createReceiverApp<Tx>(options: ReceiverAppOptions<Tx>): Express {
  checkRequiredOptions('createReceiverApp', options, RECEIVER_APP_OPTION_NAMES);
  const { store, secret, faults } = options;
  const clock = options.clock ?? systemClock;
  // Every line logged while a request is handled carries its reqId (the gateway passes its own on).
  const logger = withRequestIds(options.logger ?? pino({ level: 'silent' }));
  const metrics = options.metrics ?? createRegistry('receiver');
  // Totals and effects change with every request; never let a client answer itself with a 304.
  const app = serviceApp();
  app.use(requestEdge(metrics, logger));

  app.get('/healthz', (_req, res) => {
    res.json({ ok: true });
  });

  const effects = fencedEffects({ store, clock, secret, logger, metrics: effectMetrics(metrics) });
  if (faults) app.post('/effects', faults.middleware(), effects);
  else app.post('/effects', effects);

  app.get('/effects', async (req, res) => {
    const query = parseQuery(effectsQuery, req.query);
    const page = await readPage(query, (q) => store.listEffects(q), effectCursorText);
    res.json({ effects: page.items, next: page.next });
  });
  app.get('/effects/:jobId', async (req, res) => {
    const jobId = parseWith(jobIdParam, req.params.jobId, 'jobId in the path', ReceiverError.fromEdge);
    const { key } = parseQuery(effectQuery, req.query);
    const effect = await store.getEffect(jobId, key);
    if (!effect) {
      throw new ReceiverError(
        'unknown_effect',
        key === undefined
          ? `No effect has been applied for job "${jobId}"; check the jobId, or send the effect first.`
          : `No effect "${key}" has been applied for job "${jobId}"; check the jobId and key, or send the effect first (GET /effects?jobId= lists the job's effects).`,
        key === undefined ? { jobId } : { jobId, key },
      );
    }
    res.json({ effect });
  });
  app.get('/totals', async (_req, res) => {
    res.json(await store.totals());
  });
  app.get('/journal', async (req, res) => {
    const query = parseQuery(journalQuery, req.query);
    const page = await readPage(
      query,
      (q) => store.journal(q),
      (entry) => entry.seq,
    );
    res.json({ journal: page.items, next: page.next });
  });

  if (faults) app.use(adminRoutes(store, faults));
  app.get('/metrics', metricsRoute(metrics));
  app.get(
    '/openapi.json',
    openApiRoute(() => receiverOpenApi({ testMode: faults !== undefined })),
  );

  app.use(unknownRoute(ReceiverError.fromEdge, 'receiver', 'docs/receiver.md lists its routes'));
  app.use(receiverErrors(logger));
  return app;
}
