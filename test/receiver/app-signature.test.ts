// Signed requests through the HTTP app: a valid signature passes; missing, forged, altered,
// expired and future ones, v1 ones and ones made for another route are 401 invalid_signature
// and change nothing.
import { createHmac } from 'node:crypto';
import { pino } from 'pino';
import { describe, expect, test } from 'vitest';
import request from 'supertest';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import express from 'express';
import { createReceiverApp, fencedEffects, receiverErrors, signatureHeader } from '../../receiver/index.js';
import { fakeClock } from '../helpers/clock.js';
import { expectError, snapshot, sqliteStore } from './setup.js';

const SECRET = 'test-secret-1';

async function setup() {
  const clock = fakeClock(1_700_000_000_000);
  const { store } = await sqliteStore();
  const app = createReceiverApp({ store, clock, secret: SECRET });
  const postSigned = (token: string, body: string, signature: string | undefined) => {
    const req = request(app).post('/effects').set('Content-Type', 'application/json').set('Fencing-Token', token);
    if (signature !== undefined) req.set('Leasehold-Signature', signature);
    return req.send(body);
  };
  return { store, clock, postSigned };
}

const BODY = JSON.stringify({ jobId: 'a', qty: 5 });

/** A signature for POST /effects, the receiver's own route. */
function sign(secret: string, token: number, body: string, now: number): string {
  return signatureHeader(secret, { method: 'POST', path: '/effects', token, body }, now);
}

describe('receiver HTTP: signatures', () => {
  test('a valid signature passes, and the duplicate is signed the same way', async () => {
    const { postSigned, clock } = await setup();
    const first = await postSigned('3', BODY, sign(SECRET, 3, BODY, clock.now()));
    expect({ status: first.status, outcome: first.body.outcome }).toEqual({ status: 201, outcome: 'applied' });
    clock.advance(299_000);
    const again = await postSigned('4', BODY, sign(SECRET, 4, BODY, clock.now() - 299_000));
    expect({ status: again.status, outcome: again.body.outcome }).toEqual({ status: 200, outcome: 'duplicate' });
  });

  const cases: Array<
    [string, (now: number) => { token: string; body: string; signature: string | undefined }, RegExp]
  > = [
    ['missing', () => ({ token: '3', body: BODY, signature: undefined }), /no Leasehold-Signature/],
    ['malformed', () => ({ token: '3', body: BODY, signature: 'garbage' }), /malformed/],
    [
      'forged (other secret)',
      (now) => ({ token: '3', body: BODY, signature: sign('guess', 3, BODY, now) }),
      /does not match/,
    ],
    [
      'body altered',
      (now) => ({
        token: '3',
        body: JSON.stringify({ jobId: 'a', qty: 50 }),
        signature: sign(SECRET, 3, BODY, now),
      }),
      /does not match/,
    ],
    ['token altered', (now) => ({ token: '9', body: BODY, signature: sign(SECRET, 3, BODY, now) }), /does not match/],
    ['expired', (now) => ({ token: '3', body: BODY, signature: sign(SECRET, 3, BODY, now - 300_001) }), /too old/],
    ['in the future', (now) => ({ token: '3', body: BODY, signature: sign(SECRET, 3, BODY, now + 300_001) }), /future/],
  ];

  test.each(cases)('%s → 401 invalid_signature, nothing changed', async (_name, make, reason) => {
    const { postSigned, store, clock } = await setup();
    const other = JSON.stringify({ jobId: 'other', qty: 1 });
    expect((await postSigned('1', other, sign(SECRET, 1, other, clock.now()))).status).toBe(201);
    const before = await snapshot(store);
    const { token, body, signature } = make(clock.now());
    const res = await postSigned(token, body, signature);
    expectError(res, 401, 'invalid_signature');
    expect(res.body.error.message).toMatch(reason);
    expect(await snapshot(store)).toEqual(before);
  });

  test('signature is checked over the raw bytes: re-serialised JSON with the same meaning fails', async () => {
    const { postSigned, clock } = await setup();
    const spaced = '{ "jobId": "a", "qty": 5 }';
    expectError(await postSigned('3', spaced, sign(SECRET, 3, BODY, clock.now())), 401, 'invalid_signature');
    expect((await postSigned('3', spaced, sign(SECRET, 3, spaced, clock.now()))).status).toBe(201);
  });

  test('a signature covers the method and path: a request signed for one route is refused on another', async () => {
    const { store } = await sqliteStore();
    const clock = fakeClock(1_700_000_000_000);
    // One downstream, two effects behind one secret: what was signed for one cannot be replayed to the other.
    const app = express();
    app.post('/payments', fencedEffects({ store, clock, secret: SECRET }));
    app.post('/shipments', fencedEffects({ store, clock, secret: SECRET }));
    app.use(receiverErrors(pino({ level: 'silent' })));
    const signed = signatureHeader(SECRET, { method: 'POST', path: '/payments', token: 3, body: BODY }, clock.now());
    const post = (path: string) =>
      request(app)
        .post(path)
        .set('Content-Type', 'application/json')
        .set('Fencing-Token', '3')
        .set('Leasehold-Signature', signed)
        .send(BODY);
    expectError(await post('/shipments'), 401, 'invalid_signature');
    expect((await post('/payments')).status).toBe(201);
  });

  test('a v1 signature is refused with a reason that says how to sign now', async () => {
    const { postSigned, clock } = await setup();
    const v1 = `t=${clock.now()},v1=${createHmac('sha256', SECRET).update(`${clock.now()}.3.${BODY}`).digest('hex')}`;
    const res = await postSigned('3', BODY, v1);
    expectError(res, 401, 'invalid_signature');
    expect(res.body.error.message).toMatch(/v1 signatures.*sign with v2/);
  });

  test('a compressed body is signed as its JSON bytes, before the Content-Encoding', async () => {
    const clock = fakeClock(1_700_000_000_000);
    const { store } = await sqliteStore();
    const app = createReceiverApp({ store, clock, secret: SECRET });
    // Through a real socket: supertest would re-encode a binary body.
    const server = app.listen(0, '127.0.0.1');
    await once(server, 'listening');
    try {
      const { port } = server.address() as AddressInfo;
      const res = await fetch(`http://127.0.0.1:${port}/effects`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'content-encoding': 'gzip',
          'fencing-token': '3',
          'leasehold-signature': sign(SECRET, 3, BODY, clock.now()),
        },
        body: gzipSync(BODY),
      });
      expect(res.status).toBe(201);
    } finally {
      server.close();
    }
  });
});
