// GET /metrics on the receiver: effects by outcome (applied, duplicate, fenced, conflict) and
// refused signatures; and the same counts from fencedEffects mounted in another app.
import express from 'express';
import request from 'supertest';
import { describe, expect, test } from 'vitest';
import { createRegistry } from '../../platform/metrics.js';
import { createReceiverApp, effectMetrics, fencedEffects } from '../../receiver/index.js';
import { parseMetrics } from '../helpers/metrics.js';
import { sqliteStore } from './setup.js';

const effect = (app: express.Express, jobId: string, qty: number, token: number) =>
  request(app)
    .post('/effects')
    .set('Fencing-Token', String(token))
    .set('Content-Type', 'application/json')
    .send(JSON.stringify({ jobId, qty }));

describe('receiver metrics', () => {
  test('effects by outcome, and every outcome shown from the start', async () => {
    const { store } = await sqliteStore();
    const app = createReceiverApp({ store });
    const scrape = async () => parseMetrics((await request(app).get('/metrics').expect(200)).text);
    const before = await scrape();
    for (const outcome of ['applied', 'duplicate', 'fenced', 'conflict']) {
      expect(before.series('leasehold_receiver_effects_total')).toContainEqual({ labels: { outcome }, value: 0 });
    }
    expect((await effect(app, 'a', 3, 2)).status).toBe(201);
    expect((await effect(app, 'a', 3, 2)).status).toBe(200);
    expect((await effect(app, 'a', 3, 3)).status).toBe(200);
    expect((await effect(app, 'a', 3, 1)).status).toBe(409);
    expect((await effect(app, 'a', 4, 3)).status).toBe(422);
    expect((await effect(app, 'b', 1, 1)).status).toBe(201);
    const after = await scrape();
    const effects = (outcome: string) => after.value('leasehold_receiver_effects_total', { outcome });
    expect([effects('applied'), effects('duplicate'), effects('fenced'), effects('conflict')]).toEqual([2, 2, 1, 1]);
    expect(after.value('leasehold_http_requests_total', { method: 'POST', route: '/effects', status: '201' })).toBe(2);
  });

  test('refused signatures are counted, and fencedEffects counts in an app of its own', async () => {
    const { store } = await sqliteStore();
    const signed = createRegistry('receiver');
    const unsigned = createRegistry('receiver');
    const app = express();
    app.post('/signed', fencedEffects({ store, secret: 's3cret', metrics: effectMetrics(signed) }));
    app.post('/ship', fencedEffects({ store, metrics: effectMetrics(unsigned) }));
    const body = JSON.stringify({ jobId: 'a', qty: 1 });
    const post = (path: string) =>
      request(app).post(path).set('Fencing-Token', '1').set('Leasehold-Signature', 't=1,v1=00').type('json').send(body);
    expect((await post('/signed')).status).toBe(401);
    expect((await post('/ship')).status).toBe(201);
    const refused = parseMetrics(await signed.metrics());
    expect(refused.value('leasehold_receiver_signature_refusals_total')).toBe(1);
    expect(refused.value('leasehold_receiver_effects_total', { outcome: 'applied' })).toBe(0);
    expect(
      parseMetrics(await unsigned.metrics()).value('leasehold_receiver_effects_total', { outcome: 'applied' }),
    ).toBe(1);
  });
});
