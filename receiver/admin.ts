// Test-mode admin routes: queue faults and reset the stub between test cases. Mounted only
// when the receiver runs in test mode; otherwise these paths are unknown routes (404). Every
// POST and DELETE must declare a JSON body, a bodiless one included, like every other POST: a
// cross-site form or text/plain post cannot reset the stub or clear its faults.
import express, { type Router } from 'express';
import { jsonBody } from '../platform/http-edge.js';
import type { FaultController } from './faults.js';
import type { EffectStore } from './store.js';

export function adminRoutes<Tx>(store: EffectStore<Tx>, faults: FaultController): Router {
  const router = express.Router();
  const json = jsonBody();

  router.get('/admin/faults', (_req, res) => {
    res.json({ faults: faults.pending() });
  });
  router.post('/admin/faults', json, (req, res) => {
    res.json({ faults: faults.add(req.body) });
  });
  router.delete('/admin/faults', json, (_req, res) => {
    faults.clear();
    res.json({ faults: faults.pending() });
  });
  /** Forgets effects, journal and queued faults: a fresh stub for the next test case. */
  router.post('/admin/reset', json, async (_req, res) => {
    faults.clear();
    await store.reset();
    res.json({ reset: true, totals: await store.totals() });
  });
  return router;
}
