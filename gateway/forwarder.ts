// Forwards one effect to the receiver: `POST /effects` stamped with the verified fencing token
// and, when a secret is set, signed with the receiver's own signing module over the method, the
// path and the exact bytes sent. One keep-alive agent per forwarder, so retries and busy workers
// reuse connections.
import { FENCING_TOKEN_HEADER, SIGNATURE_HEADER, signatureHeader } from '../receiver/signature.js';
import { exchange, keepAliveAgent, urlUnder, type Exchange } from '../platform/exchange.js';

export interface ForwarderOptions {
  receiverUrl: URL;
  secret: string | undefined;
  /** Read for each attempt, so every signature carries a fresh timestamp. */
  now: () => number;
}

export interface Forwarder {
  forward(
    effect: { jobId: string; qty: number },
    token: number,
    timeoutMs: number,
    signal?: AbortSignal,
  ): Promise<Exchange>;
  close(): void;
}

/** A receiver's answer is an outcome and an effect, or an error: a few KiB at most. */
const MAX_ANSWER_BYTES = 1024 * 1024;

export function createForwarder({ receiverUrl, secret, now }: ForwarderOptions): Forwarder {
  const agent = keepAliveAgent();
  const url = urlUnder(receiverUrl, ['effects']);
  // The request target as it goes on the wire, which is what the receiver checks the signature against.
  const path = `${url.pathname}${url.search}`;
  return {
    forward(effect, token, timeoutMs, signal) {
      const body = Buffer.from(JSON.stringify({ jobId: effect.jobId, qty: effect.qty }));
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
