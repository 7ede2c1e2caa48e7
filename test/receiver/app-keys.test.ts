// Several effects per job over HTTP: POST /effects with key and body and its four answers, the
// reads of a job's keyed effects, bad input to each new field (400, nothing recorded), the
// metrics, ReceiverClient, the stub's helpers and fencedEffects' apply, all carrying key and body.
import express from 'express';
import type { Knex } from 'knex';
import request from 'supertest';
import { describe, expect, test } from 'vitest';
import { createRegistry } from '../../platform/metrics.js';
import {
  createReceiverApp,
  effectMetrics,
  fencedEffects,
  ReceiverClient,
  ReceiverError,
  startReceiver,
  type Effect,
} from '../../receiver/index.js';
import { fakeClock } from '../helpers/clock.js';
import { parseMetrics } from '../helpers/metrics.js';
import { closeAfterTest, expectError, snapshot, sqliteStore } from './setup.js';

async function setup() {
  const clock = fakeClock(1_000_000);
  const { store } = await sqliteStore();
  const metrics = createRegistry('receiver');
  const app = createReceiverApp({ store, clock, metrics });
  const http = () => request(app);
  const post = (token: number, effect: unknown) =>
    http().post('/effects').set('Fencing-Token', String(token)).type('json').send(JSON.stringify(effect));
  return { app, http, post, store, clock, metrics };
}

describe('receiver HTTP: keys and bodies', () => {
  test('each (jobId, key) is applied once; a repeat with the body reordered is a duplicate', async () => {
    const { post, http } = await setup();
    const charge = { jobId: 'order-1', key: 'charge', qty: 1250, body: { currency: 'EUR', customer: 'c-7' } };
    const applied = await post(2, charge);
    expect({ status: applied.status, body: applied.body }).toEqual({
      status: 201,
      body: {
        outcome: 'applied',
        effect: { ...charge, body: { currency: 'EUR', customer: 'c-7' }, token: 2, appliedAt: 1_000_000 },
      },
    });
    const repeat = await post(3, { ...charge, body: { customer: 'c-7', currency: 'EUR' } });
    expect({ status: repeat.status, replayed: repeat.headers['idempotent-replayed'], body: repeat.body }).toEqual({
      status: 200,
      replayed: 'true',
      body: { outcome: 'duplicate', effect: applied.body.effect },
    });
    const mail = await post(3, { jobId: 'order-1', key: 'mail', body: { to: 'ann@example.com' } });
    expect({ status: mail.status, effect: mail.body.effect }).toEqual({
      status: 201,
      effect: { jobId: 'order-1', key: 'mail', body: { to: 'ann@example.com' }, token: 3, appliedAt: 1_000_000 },
    });
    expect((await http().get('/totals')).body, 'the mail has no qty: it adds nothing to the sum').toEqual({
      effects: 2,
      qty: 1250,
    });
  });

  test('409 fenced whatever the key, with highestToken; 422 conflict with the recorded effect', async () => {
    const { post, store } = await setup();
    await post(5, { jobId: 'j', key: 'charge', qty: 10 });
    const before = await snapshot(store);
    const fenced = await post(4, { jobId: 'j', key: 'mail', body: 'hi' });
    expectError(fenced, 409, 'fenced');
    expect(fenced.body.error).toMatchObject({ jobId: 'j', key: 'mail', token: 4, highestToken: 5 });
    expectError(await post(1, { jobId: 'j', qty: 10 }), 409, 'fenced');

    const conflict = await post(5, { jobId: 'j', key: 'charge', qty: 11 });
    expectError(conflict, 422, 'conflict');
    expect(conflict.body.error).toMatchObject({
      jobId: 'j',
      key: 'charge',
      qty: 11,
      effect: { jobId: 'j', key: 'charge', qty: 10, token: 5 },
    });
    expect(conflict.body.error.message).toMatch(
      /effect "charge" of job "j" already has an effect with qty 10, not 11/i,
    );
    const body = await post(5, { jobId: 'j', key: 'charge', qty: 10, body: { extra: 1 } });
    expectError(body, 422, 'conflict');
    expect(body.body.error.message).toMatch(/another body/);
    const after = await snapshot(store);
    expect(after.effects).toEqual(before.effects);
    expect(after.journal.slice(before.journal.length).map((e) => [e.key, e.outcome])).toEqual([
      ['mail', 'fenced'],
      [undefined, 'fenced'],
      ['charge', 'conflict'],
      ['charge', 'conflict'],
    ]);
  });

  test('GET /effects/:jobId is the default effect, ?key= a keyed one; GET /effects?jobId= lists the job', async () => {
    const { post, http } = await setup();
    await post(1, { jobId: 'a', qty: 2 });
    await post(1, { jobId: 'a', key: 'mail', body: [1, 2] });
    await post(1, { jobId: 'b', key: 'mail', body: null });
    expect((await http().get('/effects/a')).body).toEqual({
      effect: { jobId: 'a', qty: 2, token: 1, appliedAt: 1_000_000 },
    });
    expect((await http().get('/effects/a?key=mail')).body.effect).toEqual({
      jobId: 'a',
      key: 'mail',
      body: [1, 2],
      token: 1,
      appliedAt: 1_000_000,
    });
    const missing = await http().get('/effects/a?key=sms');
    expectError(missing, 404, 'unknown_effect');
    expect(missing.body.error).toMatchObject({ jobId: 'a', key: 'sms' });
    expectError(await http().get('/effects/b'), 404, 'unknown_effect');
    expect((await http().get('/effects/b?key=mail')).body.effect.body).toBeNull();
    expect((await http().get('/effects?jobId=a')).body).toEqual({
      effects: [
        { jobId: 'a', qty: 2, token: 1, appliedAt: 1_000_000 },
        { jobId: 'a', key: 'mail', body: [1, 2], token: 1, appliedAt: 1_000_000 },
      ],
      next: null,
    });
    expect((await http().get('/journal')).body.journal.map((e: Record<string, unknown>) => [e.key, e.body])).toEqual([
      [undefined, undefined],
      ['mail', [1, 2]],
      ['mail', null],
    ]);
  });

  test('GET /effects pages resume inside a job: `next` names the last effect, keyed or not', async () => {
    const { post, http } = await setup();
    for (const key of [undefined, 'k1', 'k2']) await post(1, { jobId: 'a', ...(key ? { key } : {}), qty: 1 });
    await post(1, { jobId: 'b', qty: 1 });
    const seen: string[] = [];
    const nexts: unknown[] = [];
    let after: string | null = null;
    do {
      const res = await http()
        .get('/effects')
        .query({ limit: 1, ...(after === null ? {} : { after }) });
      expect(res.status).toBe(200);
      seen.push(...res.body.effects.map((e: Effect) => `${e.jobId}/${e.key ?? ''}`));
      after = res.body.next;
      nexts.push(after);
    } while (after !== null);
    expect(seen).toEqual(['a/', 'a/k1', 'a/k2', 'b/']);
    expect(nexts).toEqual(['a', 'a\u0000k1', 'a\u0000k2', null]);
  });

  const refusals: Array<[string, string, unknown]> = [
    ['empty key', 'key', { jobId: 'a', key: '', qty: 1 }],
    ['key of 129 characters', 'key', { jobId: 'a', key: 'k'.repeat(129), qty: 1 }],
    ['key a number', 'key', { jobId: 'a', key: 5, qty: 1 }],
    ['key null', 'key', { jobId: 'a', key: null, qty: 1 }],
    ['key with NUL', 'key', { jobId: 'a', key: 'x\u0000', qty: 1 }],
    ['key ".."', 'key', { jobId: 'a', key: '..', qty: 1 }],
    ['body over 64 KiB serialized', 'body', { jobId: 'a', key: 'k', body: 'x'.repeat(64 * 1024 - 1) }],
    ['neither qty nor body', 'qty', { jobId: 'a', key: 'k' }],
    ['qty 0 beside a body', 'qty', { jobId: 'a', key: 'k', qty: 0, body: 'x' }],
    ['qty fractional beside a body', 'qty', { jobId: 'a', key: 'k', qty: 1.5, body: 'x' }],
  ];
  test.each(refusals)('%s: 400 invalid_request naming %s, nothing recorded or journaled', async (_n, field, effect) => {
    const { post, store } = await setup();
    await post(1, { jobId: 'a', key: 'k', qty: 1 });
    const before = await snapshot(store);
    const res = await post(1, effect);
    expectError(res, 400, 'invalid_request');
    expect(res.body.error.issues.map((i: { path: string }) => i.path)).toEqual([field]);
    expect(await snapshot(store)).toEqual(before);
  });

  // JSON has no Infinity, but a number past its range parses as one.
  test("a body number beyond JSON's range (1e999): 400 naming where it is, nothing recorded", async () => {
    const { http, store } = await setup();
    const before = await snapshot(store);
    const res = await http()
      .post('/effects')
      .set('Fencing-Token', '1')
      .type('json')
      .send('{"jobId": "a", "key": "k", "body": {"a": [1, -1e999]}}');
    expectError(res, 400, 'invalid_request');
    expect(res.body.error.issues).toEqual([
      {
        path: 'body.a.1',
        message: `a number beyond the range of a JSON number (it reads as -Infinity); numbers must lie within ±${Number.MAX_VALUE}`,
      },
    ]);
    expect(await snapshot(store)).toEqual(before);
  });

  const badQueries: Array<[string, string]> = [
    ['GET /effects/a?key=', '/effects/a?key='],
    ['GET /effects/a?key= 129 characters', `/effects/a?key=${'k'.repeat(129)}`],
    ['GET /effects/a?kye=mail (misspelt)', '/effects/a?kye=mail'],
    ['GET /effects?jobId=', '/effects?jobId='],
    ['GET /effects?after= with an empty key', '/effects?after=a%00'],
    ['GET /effects?after= with a key of 129 characters', `/effects?after=a%00${'k'.repeat(129)}`],
  ];
  test.each(badQueries)('%s is 400 invalid_request', async (_name, path) => {
    const { http } = await setup();
    expectError(await http().get(path), 400, 'invalid_request');
  });

  test('/metrics counts keyed effects by outcome and the sizes of the bodies judged', async () => {
    const { post, metrics } = await setup();
    await post(2, { jobId: 'a', key: 'k', body: 'x'.repeat(98) });
    await post(2, { jobId: 'a', key: 'k', body: 'x'.repeat(98) });
    await post(1, { jobId: 'a', key: 'other', qty: 1 });
    await post(2, { jobId: 'a', qty: 1 });
    const scraped = parseMetrics(await metrics.metrics());
    const keyed = (outcome: string) => scraped.value('leasehold_receiver_keyed_effects_total', { outcome });
    expect([keyed('applied'), keyed('duplicate'), keyed('fenced'), keyed('conflict')]).toEqual([1, 1, 1, 0]);
    expect(scraped.value('leasehold_receiver_effects_total', { outcome: 'applied' })).toBe(2);
    expect(scraped.value('leasehold_receiver_effect_body_bytes_count')).toBe(2);
    expect(scraped.value('leasehold_receiver_effect_body_bytes_sum')).toBe(200);
    expect(scraped.value('leasehold_receiver_effect_body_bytes_bucket', { le: '64' })).toBe(0);
    expect(scraped.value('leasehold_receiver_effect_body_bytes_bucket', { le: '256' })).toBe(2);
  });
});

describe('ReceiverClient and the stub helpers with keys and bodies', () => {
  test('record sends key and body (signed when given the secret); effect, effects and waitForEffect read them', async () => {
    const receiver = await startReceiver({ secret: 's3cret' });
    closeAfterTest(() => receiver.close());
    const client = new ReceiverClient(receiver.url);
    closeAfterTest(async () => client.close());
    const mail = { jobId: 'j', key: 'mail', body: { to: 'ann', cc: [] } };
    const waiting = receiver.waitForEffect('j', { key: 'mail', timeoutMs: 2_000 });
    const applied = await client.record(mail, { token: 2, secret: 's3cret' });
    expect(applied).toEqual({
      outcome: 'applied',
      effect: { jobId: 'j', key: 'mail', body: { cc: [], to: 'ann' }, token: 2, appliedAt: expect.any(Number) },
    });
    expect(await waiting).toEqual(applied.effect);
    await client.record({ jobId: 'j', qty: 3 }, { token: 2, secret: 's3cret' });
    await client.record({ jobId: 'k', qty: 1 }, { token: 1, secret: 's3cret' });
    expect(await client.effect('j', { key: 'mail' })).toEqual(applied.effect);
    expect(await client.effect('j', { key: 'sms' })).toBeUndefined();
    expect((await client.effect('j'))?.qty).toBe(3);
    expect((await client.effects({ jobId: 'j' })).map((e) => e.key)).toEqual([undefined, 'mail']);
    expect((await client.effects()).length).toBe(3);
    expect(await receiver.effect('j', 'mail')).toEqual(applied.effect);
    expect((await receiver.effects({ jobId: 'j' })).map((e) => e.key)).toEqual([undefined, 'mail']);
    const err = await client
      .record({ ...mail, body: 'changed' }, { token: 2, secret: 's3cret' })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ReceiverError);
    expect((err as ReceiverError).details).toMatchObject({ key: 'mail', effect: applied.effect });
    await expect(receiver.waitForEffect('j', { key: 'sms', timeoutMs: 50 })).rejects.toThrow(
      'No effect for job "j", key "sms", arrived within 50 ms; the receiver has 3 effects (j, j (key mail), k).',
    );
  });

  test("fencedEffects' apply is given the effect's key and body, once per (jobId, key)", async () => {
    const { store } = await sqliteStore();
    const applied: Effect[] = [];
    const app = express();
    app.post(
      '/hooks',
      fencedEffects<Knex.Transaction>({
        store,
        metrics: effectMetrics(createRegistry('receiver')),
        apply: async (effect) => {
          applied.push(effect);
        },
      }),
    );
    const post = (effect: unknown) =>
      request(app).post('/hooks').set('Fencing-Token', '1').type('json').send(JSON.stringify(effect));
    expect((await post({ jobId: 'o', key: 'charge', qty: 5, body: { b: 1, a: 2 } })).status).toBe(201);
    expect((await post({ jobId: 'o', key: 'charge', qty: 5, body: { a: 2, b: 1 } })).status).toBe(200);
    expect((await post({ jobId: 'o', key: 'mail', body: 'hello' })).status).toBe(201);
    expect(applied).toEqual([
      { jobId: 'o', key: 'charge', qty: 5, body: { a: 2, b: 1 }, token: 1, appliedAt: expect.any(Number) },
      { jobId: 'o', key: 'mail', body: 'hello', token: 1, appliedAt: expect.any(Number) },
    ]);
  });
});
