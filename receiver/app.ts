// The receiver's express app: POST /effects through the fencedEffects router, the read routes,
// test-mode admin routes, and the one error middleware.
import express, { type Express } from 'express';
import { pino, type Logger } from 'pino';
import { adminRoutes } from './admin.js';
import { ReceiverError } from './errors.js';
import type { FaultController } from './faults.js';
import { requestLog, unknownRoute } from '../platform/http-edge.js';
import { fencedEffects, receiverErrors } from './middleware.js';
import { systemClock, type Clock } from './rules.js';
import type { EffectStore } from './store.js';

export interface ReceiverAppOptions<Tx> {
  store: EffectStore<Tx>;
  clock?: Clock;
  /** Requires a valid Leasehold-Signature on POST /effects. */
  secret?: string;
  logger?: Logger;
  /** Test mode: faults apply to POST /effects, and /admin/faults and /admin/reset exist. */
  faults?: FaultController;
}

export function createReceiverApp<Tx>(options: ReceiverAppOptions<Tx>): Express {
  const { store, secret, faults } = options;
  const clock = options.clock ?? systemClock;
  const logger = options.logger ?? pino({ level: 'silent' });
  const app = express();
  app.disable('x-powered-by');
  // Totals and effects change with every request; never let a client answer itself with a 304.
  app.disable('etag');
  app.use(requestLog(logger));

  app.get('/healthz', (_req, res) => {
    res.json({ ok: true });
  });

  const effects = fencedEffects({ store, clock, secret, logger });
  if (faults) app.post('/effects', faults.middleware(), effects);
  else app.post('/effects', effects);

  app.get('/effects', async (_req, res) => {
    res.json({ effects: await store.listEffects() });
  });
  app.get('/effects/:jobId', async (req, res) => {
    const effect = await store.getEffect(req.params.jobId);
    if (!effect) {
      throw new ReceiverError(
        'unknown_effect',
        `No effect has been applied for job "${req.params.jobId}"; check the jobId, or send the effect first.`,
        { jobId: req.params.jobId },
      );
    }
    res.json({ effect });
  });
  app.get('/totals', async (_req, res) => {
    res.json(await store.totals());
  });
  app.get('/journal', async (_req, res) => {
    res.json({ journal: await store.journal() });
  });

  if (faults) app.use(adminRoutes(store, faults));

  app.use(unknownRoute(ReceiverError.fromEdge, 'receiver', 'docs/receiver.md lists its routes'));
  app.use(receiverErrors(logger));
  return app;
}
