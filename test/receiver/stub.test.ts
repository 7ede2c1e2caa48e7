// The receiver as another project's stub downstream: started with one call, driven over HTTP,
// inspected from code, with every fault mode from code and over the admin endpoint.
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { startReceiver, signatureHeader, type StartReceiverOptions } from '../../receiver/index.js';
import { tempDir } from '../helpers/tmp.js';
import { closeAfterTest, expectError, postEffect, send } from './setup.js';

async function stub(options: StartReceiverOptions = {}) {
  const receiver = await startReceiver(options);
  closeAfterTest(() => receiver.close());
  return receiver;
}

const admin = (url: string, path: string, body?: unknown, method = 'POST') =>
  send(url, {
    method,
    path,
    headers: { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });

/** The error a request failed with, or a description of the answer it got instead. */
async function failure(
  promise: Promise<{ status: number; body: unknown }>,
): Promise<{ code?: string; message: string }> {
  try {
    const res = await promise;
    return { message: `expected a connection error, got ${res.status} ${JSON.stringify(res.body)}` };
  } catch (err) {
    return { code: (err as NodeJS.ErrnoException).code, message: (err as Error).message };
  }
}

describe('startReceiver as a stub downstream', () => {
  test('starts on 127.0.0.1 with a free port and in-memory store; reads from code match HTTP', async () => {
    const receiver = await stub();
    expect(receiver.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect((await fetch(`${receiver.url}/healthz`)).status).toBe(200);

    const res = await fetch(`${receiver.url}/effects`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'Fencing-Token': '2' },
      body: JSON.stringify({ jobId: 'j1', qty: 4 }),
    });
    expect(res.status).toBe(201);
    expect((await postEffect(receiver.url, { jobId: 'j1', qty: 4, token: 1 })).status).toBe(409);

    expect(await receiver.effects()).toEqual([{ jobId: 'j1', qty: 4, token: 2, appliedAt: expect.any(Number) }]);
    expect(await receiver.effect('j1')).toMatchObject({ qty: 4, token: 2 });
    expect(await receiver.effect('nope')).toBeUndefined();
    expect(await receiver.totals()).toEqual({ effects: 1, qty: 4 });
    expect((await receiver.journal()).map((e) => e.outcome)).toEqual(['applied', 'fenced']);
    const overHttp = (await (await fetch(`${receiver.url}/effects`)).json()) as unknown;
    expect(overHttp).toEqual({ effects: await receiver.effects(), next: null });
  });

  test('reset from code forgets effects, journal and queued faults', async () => {
    const receiver = await stub();
    await postEffect(receiver.url, { jobId: 'j1', qty: 4, token: 1 });
    receiver.faults.fail({ count: 3 });
    await receiver.reset();
    expect({
      totals: await receiver.totals(),
      journal: await receiver.journal(),
      faults: receiver.faults.pending(),
    }).toEqual({
      totals: { effects: 0, qty: 0 },
      journal: [],
      faults: [],
    });
    expect((await postEffect(receiver.url, { jobId: 'j1', qty: 9, token: 1 })).status).toBe(201);
  });

  test('fault "fail": the next N answer the chosen status and record nothing; then back to normal', async () => {
    const receiver = await stub();
    receiver.faults.fail({ status: 502, count: 2 });
    for (let i = 0; i < 2; i += 1) {
      const res = await postEffect(receiver.url, { jobId: 'j1', qty: 1, token: 1 });
      expectError(res, 502, 'injected_fault');
    }
    expect(await receiver.totals()).toEqual({ effects: 0, qty: 0 });
    expect(await receiver.journal()).toEqual([]);
    expect((await postEffect(receiver.url, { jobId: 'j1', qty: 1, token: 1 })).status).toBe(201);
  });

  test('fault "delay": the effect is recorded at once, the answer arrives after the delay', async () => {
    const receiver = await stub();
    receiver.faults.delay({ ms: 400 });
    const started = Date.now();
    let answered = false;
    const pending = postEffect(receiver.url, { jobId: 'slow', qty: 2, token: 1 }).then((res) => {
      answered = true;
      return res;
    });
    while (!(await receiver.effect('slow'))) await new Promise((resolve) => setTimeout(resolve, 10));
    expect({ recorded: true, answered }).toEqual({ recorded: true, answered: false });
    const res = await pending;
    const elapsed = Date.now() - started;
    expect({ status: res.status, outcome: res.body.outcome, delayed: elapsed >= 390 }).toEqual({
      status: 201,
      outcome: 'applied',
      delayed: true,
    });
    expect(receiver.faults.pending(), 'one delay queued, one taken').toEqual([]);
    expect(
      (await postEffect(receiver.url, { jobId: 'slow', qty: 2, token: 1 })).headers['injected-fault'],
    ).toBeUndefined();
  });

  test('fault "drop": effect recorded, connection reset; the retry is a duplicate', async () => {
    const receiver = await stub();
    receiver.faults.drop();
    const dropped = await failure(postEffect(receiver.url, { jobId: 'j1', qty: 3, token: 5 }));
    expect(dropped.code, dropped.message).toBe('ECONNRESET');
    expect(await receiver.effect('j1')).toMatchObject({ jobId: 'j1', qty: 3, token: 5 });

    const retry = await postEffect(receiver.url, { jobId: 'j1', qty: 3, token: 5 });
    expect({
      status: retry.status,
      outcome: retry.body.outcome,
      replayed: retry.headers['idempotent-replayed'],
    }).toEqual({
      status: 200,
      outcome: 'duplicate',
      replayed: 'true',
    });
    expect(await receiver.totals()).toEqual({ effects: 1, qty: 3 });
  });

  test('faults queue up in order, one per request', async () => {
    const receiver = await stub();
    receiver.faults.fail({ status: 500 });
    receiver.faults.drop();
    expect(receiver.faults.pending()).toEqual([{ kind: 'fail', status: 500 }, { kind: 'drop' }]);
    expect((await postEffect(receiver.url, { jobId: 'a', qty: 1, token: 1 })).status).toBe(500);
    expect((await failure(postEffect(receiver.url, { jobId: 'a', qty: 1, token: 1 }))).code).toBe('ECONNRESET');
    expect((await postEffect(receiver.url, { jobId: 'a', qty: 1, token: 1 })).status).toBe(200);
    expect(() => receiver.faults.delay({ ms: -1 })).toThrow(/ms/);
  });

  test('admin endpoint: queue, list and clear faults; reset', async () => {
    const receiver = await stub();
    const queued = await admin(receiver.url, '/admin/faults', { kind: 'fail', status: 429, count: 2 });
    expect({ status: queued.status, body: queued.body }).toEqual({
      status: 200,
      body: {
        faults: [
          { kind: 'fail', status: 429 },
          { kind: 'fail', status: 429 },
        ],
      },
    });
    expectError(await postEffect(receiver.url, { jobId: 'a', qty: 1, token: 1 }), 429, 'injected_fault');
    expect((await admin(receiver.url, '/admin/faults', undefined, 'GET')).body).toEqual({
      faults: [{ kind: 'fail', status: 429 }],
    });
    expect((await admin(receiver.url, '/admin/faults', undefined, 'DELETE')).body).toEqual({ faults: [] });

    expect((await admin(receiver.url, '/admin/faults', { kind: 'drop' })).status).toBe(200);
    expect((await failure(postEffect(receiver.url, { jobId: 'a', qty: 1, token: 1 }))).code).toBe('ECONNRESET');
    expect((await admin(receiver.url, '/admin/faults', { kind: 'delay', ms: 200 })).status).toBe(200);
    const started = Date.now();
    expect((await postEffect(receiver.url, { jobId: 'a', qty: 1, token: 1 })).status).toBe(200);
    expect(Date.now() - started).toBeGreaterThanOrEqual(190);

    expectError(await admin(receiver.url, '/admin/faults', { kind: 'explode' }), 400, 'invalid_request');
    expectError(await admin(receiver.url, '/admin/faults', { kind: 'fail', status: 200 }), 400, 'invalid_request');

    const reset = await admin(receiver.url, '/admin/reset');
    expect({ status: reset.status, totals: reset.body.totals }).toEqual({
      status: 200,
      totals: { effects: 0, qty: 0 },
    });
    expect(await receiver.journal()).toEqual([]);
  });

  test('without test mode the admin routes are 404, faults cannot be queued and reset() erases nothing', async () => {
    const receiver = await stub({ testMode: false });
    expectError(await admin(receiver.url, '/admin/faults', { kind: 'drop' }), 404, 'not_found');
    expectError(await admin(receiver.url, '/admin/reset'), 404, 'not_found');
    expect(() => receiver.faults.drop()).toThrow(/testMode/);
    expect((await postEffect(receiver.url, { jobId: 'kept', qty: 2, token: 5 })).status).toBe(201);
    await expect(receiver.reset()).rejects.toThrow(
      'The receiver was not started in test mode: start it with testMode: true to erase its effects and highest tokens.',
    );
    // The highest token outlived the refused reset: a lower one is still fenced.
    expectError(await postEffect(receiver.url, { jobId: 'kept', qty: 2, token: 1 }), 409, 'fenced');
    expect(await receiver.totals()).toEqual({ effects: 1, qty: 2 });
  });

  test('with a secret, unsigned requests are 401 and signed ones apply', async () => {
    const receiver = await stub({ secret: 's3cret' });
    const body = JSON.stringify({ jobId: 'a', qty: 1 });
    expectError(await postEffect(receiver.url, { jobId: 'a', qty: 1, token: 1 }), 401, 'invalid_signature');
    const signed = await send(receiver.url, {
      method: 'POST',
      path: '/effects',
      headers: {
        'fencing-token': '1',
        'content-type': 'application/json',
        'leasehold-signature': signatureHeader(
          's3cret',
          { method: 'POST', path: '/effects', token: 1, body },
          Date.now(),
        ),
      },
      body,
    });
    expect(signed.status).toBe(201);
  });

  test('racing HTTP requests for one job on two receivers sharing a file give exactly one applied', async () => {
    const db = join(tempDir('leasehold-receiver-race-'), 'shared.sqlite');
    const first = await stub({ db });
    const second = await stub({ db });
    const tokens = Array.from({ length: 40 }, (_, i) => 1 + ((i * 13) % 7));
    const results = await Promise.all(
      tokens.map((token, i) => postEffect(i % 2 ? first.url : second.url, { jobId: 'contended', qty: 8, token })),
    );
    const counts: Record<string, number> = {};
    for (const res of results) {
      const key = `${res.status} ${res.body.outcome ?? res.body.error?.code}`;
      counts[key] = (counts[key] ?? 0) + 1;
    }
    expect(counts['201 applied'], JSON.stringify(counts)).toBe(1);
    expect(Object.keys(counts).filter((k) => !['201 applied', '200 duplicate', '409 fenced'].includes(k))).toEqual([]);
    expect(await first.totals()).toEqual({ effects: 1, qty: 8 });
    expect((await second.journal()).length).toBe(tokens.length);
  });

  test('close() returns while a delayed answer is still pending', async () => {
    const receiver = await startReceiver();
    receiver.faults.delay({ ms: 30_000 });
    const pending = failure(postEffect(receiver.url, { jobId: 'a', qty: 1, token: 1 }));
    while (!(await receiver.effect('a'))) await new Promise((resolve) => setTimeout(resolve, 10));
    const started = Date.now();
    await receiver.close({ graceMs: 100 });
    expect(Date.now() - started).toBeLessThan(5_000);
    expect((await pending).code).toBe('ECONNRESET');
  });
});
