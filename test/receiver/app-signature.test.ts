// Signed requests through the HTTP app: a valid signature passes; missing, forged, altered,
// expired and future ones are 401 invalid_signature and change nothing.
import { describe, expect, test } from 'vitest';
import request from 'supertest';
import { createReceiverApp, signatureHeader } from '../../receiver/index.js';
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

describe('receiver HTTP: signatures', () => {
  test('a valid signature passes, and the duplicate is signed the same way', async () => {
    const { postSigned, clock } = await setup();
    const first = await postSigned('3', BODY, signatureHeader(SECRET, 3, BODY, clock.now()));
    expect({ status: first.status, outcome: first.body.outcome }).toEqual({ status: 201, outcome: 'applied' });
    clock.advance(299_000);
    const again = await postSigned('4', BODY, signatureHeader(SECRET, 4, BODY, clock.now() - 299_000));
    expect({ status: again.status, outcome: again.body.outcome }).toEqual({ status: 200, outcome: 'duplicate' });
  });

  const cases: Array<
    [string, (now: number) => { token: string; body: string; signature: string | undefined }, RegExp]
  > = [
    ['missing', () => ({ token: '3', body: BODY, signature: undefined }), /no Leasehold-Signature/],
    ['malformed', () => ({ token: '3', body: BODY, signature: 'garbage' }), /malformed/],
    [
      'forged (other secret)',
      (now) => ({ token: '3', body: BODY, signature: signatureHeader('guess', 3, BODY, now) }),
      /does not match/,
    ],
    [
      'body altered',
      (now) => ({
        token: '3',
        body: JSON.stringify({ jobId: 'a', qty: 50 }),
        signature: signatureHeader(SECRET, 3, BODY, now),
      }),
      /does not match/,
    ],
    [
      'token altered',
      (now) => ({ token: '9', body: BODY, signature: signatureHeader(SECRET, 3, BODY, now) }),
      /does not match/,
    ],
    [
      'expired',
      (now) => ({ token: '3', body: BODY, signature: signatureHeader(SECRET, 3, BODY, now - 300_001) }),
      /too old/,
    ],
    [
      'in the future',
      (now) => ({ token: '3', body: BODY, signature: signatureHeader(SECRET, 3, BODY, now + 300_001) }),
      /future/,
    ],
  ];

  test.each(cases)('%s → 401 invalid_signature, nothing changed', async (_name, make, reason) => {
    const { postSigned, store, clock } = await setup();
    const other = JSON.stringify({ jobId: 'other', qty: 1 });
    expect((await postSigned('1', other, signatureHeader(SECRET, 1, other, clock.now()))).status).toBe(201);
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
    expectError(await postSigned('3', spaced, signatureHeader(SECRET, 3, BODY, clock.now())), 401, 'invalid_signature');
    expect((await postSigned('3', spaced, signatureHeader(SECRET, 3, spaced, clock.now()))).status).toBe(201);
  });
});
