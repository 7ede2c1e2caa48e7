// Forwards one effect to one downstream: `POST` to its effect endpoint, stamped with the verified
// fencing token and, when it has a secret, signed with the receiver's own signing module over the
// method, the endpoint's path and the exact bytes sent. One keep-alive agent per forwarder, so
// retries and busy workers reuse connections.
import { FENCING_TOKEN_HEADER, SIGNATURE_HEADER, signatureHeader } from '../receiver/signature.js';
import { exchange, keepAliveAgent, type Exchange } from '../platform/exchange.js';

export interface ForwarderOptions {
  /** The downstream's effect endpoint, path included (a receiver's is `<base>/effects`). */
  endpoint: URL;
  secret: string | undefined;
  /** Read for each attempt, so every signature carries a fresh timestamp. */
  now: () => number;
}

/** What a downstream is sent: the fields the send gave, and only those. */
export interface ForwardedEffect {
  jobId: string;
  key?: string | undefined;
  qty?: number | undefined;
  body?: unknown;
}

export interface Forwarder {
  forward(effect: ForwardedEffect, token: number, timeoutMs: number, signal?: AbortSignal): Promise<Exchange>;
  close(): void;
}

/** A downstream's answer is an outcome and an effect, or an error: its body (64 KiB at most) and a little more. */
const MAX_ANSWER_BYTES = 1024 * 1024;

export function createForwarder({ endpoint, secret, now }: ForwarderOptions): Forwarder {
  const agent = keepAliveAgent();
  const url = new URL(endpoint.href);
  url.hash = '';
  // The request target as it goes on the wire, which is what the downstream checks the signature against.
  const path = `${url.pathname}${url.search}`;
  return {
    forward(effect, token, timeoutMs, signal) {
      const body = Buffer.from(JSON.stringify(wireEffect(effect)));
      const headers: Record<string, string> = { [FENCING_TOKEN_HEADER]: String(token) };
      if (secret !== undefined) {
        headers[SIGNATURE_HEADER] = signatureHeader(secret, { method: 'POST', path, token, body }, now());
      }
      return exchange({
        method: 'POST',
        url,
        body,
        headers,
        timeoutMs,
        agent,
        signal,
        maxAnswerBytes: MAX_ANSWER_BYTES,
      });
    },
    close() {
      agent.destroy();
    },
  };
}

/** `{jobId, key, qty, body}` in that order, without the fields the send left out. */
function wireEffect(effect: ForwardedEffect): ForwardedEffect {
  return {
    jobId: effect.jobId,
    ...(effect.key !== undefined ? { key: effect.key } : {}),
    ...(effect.qty !== undefined ? { qty: effect.qty } : {}),
    ...(effect.body !== undefined ? { body: effect.body } : {}),
  };
}
