// The signature scheme on its own: format, tolerance window and every kind of rejection.
import { createHmac } from 'node:crypto';
import { describe, expect, test } from 'vitest';
import { SIGNATURE_HEADER, signatureHeader, verifySignature } from '../../receiver/signature.js';

const SECRET = 'shh-test-secret';
const BODY = '{"jobId":"a","qty":2}';
const NOW = 1_700_000_000_000;

describe('signature', () => {
  test('header is t=<ms>,v1=<hex HMAC-SHA256 of "<t>.<token>.<raw body>">', () => {
    const expected = createHmac('sha256', SECRET).update(`${NOW}.7.${BODY}`).digest('hex');
    expect(signatureHeader(SECRET, 7, BODY, NOW)).toBe(`t=${NOW},v1=${expected}`);
    expect(signatureHeader(SECRET, 7, Buffer.from(BODY), NOW)).toBe(`t=${NOW},v1=${expected}`);
    expect(SIGNATURE_HEADER).toBe('leasehold-signature');
  });

  test('a fresh, matching signature passes, up to exactly the tolerance either way', () => {
    const header = signatureHeader(SECRET, 7, BODY, NOW);
    expect(verifySignature(SECRET, header, 7, Buffer.from(BODY), NOW)).toEqual({ ok: true });
    expect(verifySignature(SECRET, header, 7, BODY, NOW + 300_000)).toEqual({ ok: true });
    expect(verifySignature(SECRET, header, 7, BODY, NOW - 300_000)).toEqual({ ok: true });
  });

  test('an extra v1 entry (secret rotation) still passes when one matches', () => {
    const header = signatureHeader(SECRET, 7, BODY, NOW);
    const other = signatureHeader('old-secret', 7, BODY, NOW).split(',')[1];
    expect(verifySignature(SECRET, `${header},${other}`, 7, BODY, NOW)).toEqual({ ok: true });
  });

  const header = signatureHeader(SECRET, 7, BODY, NOW);
  test.each([
    ['missing', undefined, 7, BODY, NOW, /no Leasehold-Signature header/],
    ['empty', '', 7, BODY, NOW, /no Leasehold-Signature header/],
    ['malformed', 'v1=abc', 7, BODY, NOW, /malformed/],
    ['forged', signatureHeader('wrong-secret', 7, BODY, NOW), 7, BODY, NOW, /does not match/],
    ['body altered', header, 7, '{"jobId":"a","qty":3}', NOW, /does not match/],
    ['token altered', header, 8, BODY, NOW, /does not match/],
    ['too old', header, 7, BODY, NOW + 300_001, /too old/],
    ['from the future', header, 7, BODY, NOW - 300_001, /in the future/],
  ] as const)('%s fails with a reason saying so', (_name, value, token, body, now, reason) => {
    const check = verifySignature(SECRET, value, token, body, now);
    expect(check.ok).toBe(false);
    expect(check.ok ? '' : check.reason).toMatch(reason);
  });
});
