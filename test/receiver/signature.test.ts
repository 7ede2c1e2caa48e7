// The signature scheme on its own: format, tolerance window and every kind of rejection.
import { createHmac } from 'node:crypto';
import { describe, expect, test } from 'vitest';
import { SIGNATURE_HEADER, signatureHeader, verifySignature, type SignedRequest } from '../../receiver/signature.js';

const SECRET = 'shh-test-secret';
const BODY = '{"jobId":"a","qty":2}';
const NOW = 1_700_000_000_000;
const REQUEST: SignedRequest = { method: 'POST', path: '/effects', token: 7, body: BODY };

describe('signature', () => {
  test('header is t=<ms>,v2=<hex HMAC-SHA256 of "<t>.<token>.<METHOD> <path>.<body>">', () => {
    const expected = createHmac('sha256', SECRET).update(`${NOW}.7.POST /effects.${BODY}`).digest('hex');
    expect(signatureHeader(SECRET, REQUEST, NOW)).toBe(`t=${NOW},v2=${expected}`);
    expect(signatureHeader(SECRET, { ...REQUEST, body: Buffer.from(BODY) }, NOW)).toBe(`t=${NOW},v2=${expected}`);
    expect(signatureHeader(SECRET, { ...REQUEST, method: 'post' }, NOW)).toBe(`t=${NOW},v2=${expected}`);
    expect(SIGNATURE_HEADER).toBe('leasehold-signature');
  });

  test('a fresh, matching signature passes, up to exactly the tolerance either way', () => {
    const header = signatureHeader(SECRET, REQUEST, NOW);
    expect(verifySignature(SECRET, header, { ...REQUEST, body: Buffer.from(BODY) }, NOW)).toEqual({ ok: true });
    expect(verifySignature(SECRET, header, REQUEST, NOW + 300_000)).toEqual({ ok: true });
    expect(verifySignature(SECRET, header, REQUEST, NOW - 300_000)).toEqual({ ok: true });
  });

  test('an extra v2 entry (secret rotation) still passes when one matches', () => {
    const header = signatureHeader(SECRET, REQUEST, NOW);
    const other = signatureHeader('old-secret', REQUEST, NOW).split(',')[1];
    expect(verifySignature(SECRET, `${header},${other}`, REQUEST, NOW)).toEqual({ ok: true });
  });

  const header = signatureHeader(SECRET, REQUEST, NOW);
  // A v1 signature as the first scheme made it: over "<t>.<token>.<body>", without method and path.
  const v1 = `t=${NOW},v1=${createHmac('sha256', SECRET).update(`${NOW}.7.${BODY}`).digest('hex')}`;
  test.each([
    ['missing', undefined, REQUEST, NOW, /no Leasehold-Signature header/],
    ['empty', '', REQUEST, NOW, /no Leasehold-Signature header/],
    ['malformed', 'v2=abc', REQUEST, NOW, /malformed/],
    ['v1 only (no method and path)', v1, REQUEST, NOW, /only v1 signatures.*no longer accepted/],
    ['forged', signatureHeader('wrong-secret', REQUEST, NOW), REQUEST, NOW, /does not match/],
    ['body altered', header, { ...REQUEST, body: '{"jobId":"a","qty":3}' }, NOW, /does not match/],
    ['token altered', header, { ...REQUEST, token: 8 }, NOW, /does not match/],
    ['replayed to another path', header, { ...REQUEST, path: '/payments/effects' }, NOW, /does not match/],
    ['replayed with another method', header, { ...REQUEST, method: 'PUT' }, NOW, /does not match/],
    ['too old', header, REQUEST, NOW + 300_001, /too old/],
    ['from the future', header, REQUEST, NOW - 300_001, /in the future/],
  ] as const)('%s fails with a reason saying so', (_name, value, request, now, reason) => {
    const check = verifySignature(SECRET, value, request, now);
    expect(check.ok).toBe(false);
    expect(check.ok ? '' : check.reason).toMatch(reason);
  });
});
