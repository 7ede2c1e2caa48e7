// Signing and verifying `Leasehold-Signature`, the one place both sides of the wire share:
// the gateway signs what it forwards, the receiver verifies it; and reading a Leasehold-Batch
// offer, which the gateway and `leasehold conform` read alike. Depends on node:crypto only.
import { createHmac, timingSafeEqual } from 'node:crypto';

/** Lower-case, as Node presents incoming header names. */
export const SIGNATURE_HEADER = 'leasehold-signature';
/** The header that carries the fencing token; the token is part of what is signed. */
export const FENCING_TOKEN_HEADER = 'fencing-token';
/** A signature is accepted while its timestamp is within this distance of the receiver's clock. */
export const SIGNATURE_TOLERANCE_MS = 300_000;

export type SignatureCheck = { ok: true } | { ok: false; reason: string };

/**
 * What a signature covers: the request line's method and target (path and query, as sent, e.g.
 * `POST /effects`), the fencing token, and the body's bytes as the sender serialised them (after
 * any Content-Encoding is undone). The method and path bind a signature to the route it was made
 * for: a request signed for one route cannot be replayed to another that shares the secret.
 */
export interface SignedRequest {
  method: string;
  /** The request target: path and query exactly as sent (`/effects`, `/prefix/effects?x=1`). */
  path: string;
  /** The Fencing-Token as sent; a batch of effects, which carries a token per effect, signs `batch`. */
  token: number | typeof BATCH_TOKEN;
  body: string | Buffer;
}

/**
 * What a batch request signs in the token's place. No Fencing-Token is ever `batch` (it is
 * digits only), so a batch's signature never verifies as a single effect's, nor the reverse.
 */
export const BATCH_TOKEN = 'batch';

/** The version tag of the signing scheme; `v1` (no method and path) is refused. */
export const SIGNATURE_VERSION = 'v2';

function mac(secret: string, t: number, request: SignedRequest): Buffer {
  // "<t>.<token>.<METHOD> <path>.<body>" — the body's own bytes, so re-serialising JSON can never change the MAC.
  return createHmac('sha256', secret)
    .update(`${t}.${request.token}.${request.method.toUpperCase()} ${request.path}.`)
    .update(request.body)
    .digest();
}

/** The header value for one request: `t=<now>,v2=<hex HMAC-SHA256 of "<t>.<token>.<METHOD> <path>.<body>">`. */
export function signatureHeader(secret: string, request: SignedRequest, now: number): string {
  return `t=${now},${SIGNATURE_VERSION}=${mac(secret, now, request).toString('hex')}`;
}

/**
 * Checks a header against the request it came with. `reason` is a sentence saying which check
 * failed (missing, malformed, too old, too far in the future, or not matching), for the 401.
 * Several `v2=` entries are allowed, so a sender can sign with an old and a new secret while
 * the secret is being rotated. `v1=` entries, which do not cover the method and path, are
 * ignored: a header with only those is refused, saying so.
 */
export function verifySignature(
  secret: string,
  header: string | undefined,
  request: SignedRequest,
  now: number,
  toleranceMs = SIGNATURE_TOLERANCE_MS,
): SignatureCheck {
  if (header === undefined || header.trim() === '') {
    return { ok: false, reason: 'The request has no Leasehold-Signature header; sign it with the shared secret.' };
  }
  let t: number | undefined;
  let v1 = false;
  const candidates: string[] = [];
  for (const part of header.split(',')) {
    const eq = part.indexOf('=');
    const key = part.slice(0, eq).trim();
    const value = part.slice(eq + 1).trim();
    if (eq > 0 && key === 't' && /^\d{1,16}$/.test(value)) t = Number(value);
    else if (eq > 0 && key === SIGNATURE_VERSION && /^[0-9a-f]{64}$/i.test(value)) candidates.push(value.toLowerCase());
    else if (key === 'v1') v1 = true;
  }
  if (candidates.length === 0 && v1) {
    return {
      ok: false,
      reason:
        'The Leasehold-Signature header has only v1 signatures, which do not cover the method and path and are no longer accepted; sign with v2: HMAC-SHA256 of "<t>.<token>.<METHOD> <path>.<body>".',
    };
  }
  if (t === undefined || !Number.isSafeInteger(t) || candidates.length === 0) {
    return {
      ok: false,
      reason: 'The Leasehold-Signature header is malformed; expected "t=<epoch ms>,v2=<64 hex digits>".',
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
  const expected = mac(secret, t, request);
  // Compare every candidate so the time taken does not depend on which one matched.
  let matched = false;
  for (const candidate of candidates) {
    if (timingSafeEqual(expected, Buffer.from(candidate, 'hex'))) matched = true;
  }
  if (!matched) {
    return {
      ok: false,
      reason:
        'The signature does not match this request: the body, Fencing-Token, method or path was altered (or differs from what was signed), or it was signed with a different secret.',
    };
  }
  return { ok: true };
}

/**
 * A Leasehold-Batch offer read as the protocol has it: the target resolved against the effect
 * `endpoint` (its fragment dropped), or, for an offer nobody may send batches to, why not: an
 * empty header, not a URL, not http:, or another origin. `undefined` when nothing is offered.
 * The gateway uses the target and ignores the rest; `leasehold conform` fails on the rest.
 */
export function readBatchOffer(
  offered: string | string[] | undefined,
  endpoint: URL,
): { target: URL } | { problem: string } | undefined {
  if (typeof offered !== 'string') return undefined;
  const value = offered.trim();
  if (value === '') return { problem: 'an empty header' };
  const quoted = JSON.stringify(offered);
  // A URL holds no whitespace; Node.js joins a header sent twice with ", ", which would
  // otherwise read as one relative URL.
  if (/\s/.test(value))
    return { problem: `${quoted}, which holds whitespace (a header sent twice is joined with ", ")` };
  let target: URL;
  try {
    target = new URL(offered, endpoint);
  } catch {
    return { problem: `${quoted}, which is not a URL` };
  }
  if (target.protocol !== 'http:') return { problem: `${quoted}, which is not an http: URL` };
  if (target.origin !== endpoint.origin) return { problem: `${quoted}, which is on ${target.origin}` };
  target.hash = '';
  return { target };
}
