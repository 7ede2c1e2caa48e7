// Signing and verifying `Leasehold-Signature`, the one place both sides of the wire share:
// the gateway signs what it forwards, the receiver verifies it. Depends on node:crypto only.
import { createHmac, timingSafeEqual } from 'node:crypto';

/** Lower-case, as Node presents incoming header names. */
export const SIGNATURE_HEADER = 'leasehold-signature';
/** The header that carries the fencing token; the token is part of what is signed. */
export const FENCING_TOKEN_HEADER = 'fencing-token';
/** A signature is accepted while its timestamp is within this distance of the receiver's clock. */
export const SIGNATURE_TOLERANCE_MS = 300_000;

export type SignatureCheck = { ok: true } | { ok: false; reason: string };

function mac(secret: string, t: number, token: number, rawBody: string | Buffer): Buffer {
  // "<t>.<token>.<raw body>" — the raw bytes, so re-serialising JSON can never change the MAC.
  return createHmac('sha256', secret).update(`${t}.${token}.`).update(rawBody).digest();
}

/** The header value for one request: `t=<now>,v1=<hex HMAC-SHA256 of "<t>.<token>.<raw body>">`. */
export function signatureHeader(secret: string, token: number, rawBody: string | Buffer, now: number): string {
  return `t=${now},v1=${mac(secret, now, token, rawBody).toString('hex')}`;
}

/**
 * Checks a header against the request it came with. `reason` is a sentence saying which check
 * failed (missing, malformed, too old, too far in the future, or not matching), for the 401.
 * Several `v1=` entries are allowed, so a sender can sign with an old and a new secret while
 * the secret is being rotated.
 */
export function verifySignature(
  secret: string,
  header: string | undefined,
  token: number,
  rawBody: Buffer | string,
  now: number,
  toleranceMs = SIGNATURE_TOLERANCE_MS,
): SignatureCheck {
  if (header === undefined || header.trim() === '') {
    return { ok: false, reason: 'The request has no Leasehold-Signature header; sign it with the shared secret.' };
  }
  let t: number | undefined;
  const candidates: string[] = [];
  for (const part of header.split(',')) {
    const eq = part.indexOf('=');
    const key = part.slice(0, eq).trim();
    const value = part.slice(eq + 1).trim();
    if (eq > 0 && key === 't' && /^\d{1,16}$/.test(value)) t = Number(value);
    else if (eq > 0 && key === 'v1' && /^[0-9a-f]{64}$/i.test(value)) candidates.push(value.toLowerCase());
  }
  if (t === undefined || !Number.isSafeInteger(t) || candidates.length === 0) {
    return {
      ok: false,
      reason: 'The Leasehold-Signature header is malformed; expected "t=<epoch ms>,v1=<64 hex digits>".',
    };
  }
  if (now - t > toleranceMs) {
    return {
      ok: false,
      reason: `The signature is too old: signed at ${t}, ${now - t} ms before the receiver's clock (limit ${toleranceMs} ms); sign each request when it is sent and check the clocks.`,
    };
  }
  if (t - now > toleranceMs) {
    return {
      ok: false,
      reason: `The signature is dated in the future: signed at ${t}, ${t - now} ms after the receiver's clock (limit ${toleranceMs} ms); check the sender's clock.`,
    };
  }
  const expected = mac(secret, t, token, rawBody);
  // Compare every candidate so the time taken does not depend on which one matched.
  let matched = false;
  for (const candidate of candidates) {
    if (timingSafeEqual(expected, Buffer.from(candidate, 'hex'))) matched = true;
  }
  if (!matched) {
    return {
      ok: false,
      reason:
        'The signature does not match this request: the body or Fencing-Token was altered, or it was signed with a different secret.',
    };
  }
  return { ok: true };
}
