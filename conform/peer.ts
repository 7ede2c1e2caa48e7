// The conformance suite's one way to reach a downstream: `POST` an effect to its endpoint with a
// Fencing-Token, signed as the gateway signs (or, on purpose, unsigned, forged, signed for another
// route, or with the first round's v1), and read the answer whatever it is.
import { createHmac } from 'node:crypto';
import {
  ANSWER_TOO_LARGE,
  CUT_MID_ANSWER,
  DEFAULT_MAX_ANSWER_BYTES,
  exchange,
  keepAliveAgent,
  type Exchange,
} from '../platform/exchange.js';
import { FENCING_TOKEN_HEADER, SIGNATURE_HEADER, signatureHeader } from '../receiver/signature.js';

/** How a request is signed: as the protocol asks, or wrong in one way a downstream must refuse. */
export type Signing = 'signed' | 'unsigned' | 'forged' | 'other-route' | 'v1';

export interface Attempt {
  /** The Fencing-Token header's text; a number is sent as its digits. Left out: no header. */
  token?: number | string;
  /** The JSON body, or raw text sent as is (for bodies that are not JSON). */
  body: unknown;
  raw?: boolean;
  signing?: Signing;
}

/**
 * A request that got no HTTP answer conform can read. The message says what came instead, worded
 * to end "expected 201 applied, got …": no connection, no answer, or bytes that are not HTTP.
 */
export class NoAnswer extends Error {
  override readonly name = 'NoAnswer';
}

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
}

/** How a batch is signed: over `batch` in the token's place, not at all, or as a single effect is (token 1). */
export type BatchSigning = 'signed' | 'unsigned' | 'as-single';

export interface Peer {
  /** The effect endpoint. */
  readonly url: URL;
  post(attempt: Attempt): Promise<Answer>;
  /** `POST` a batch `{effects: [...]}` to `target`, the downstream's offered batch target. */
  postBatch(target: URL, effects: readonly unknown[], signing?: BatchSigning): Promise<Answer>;
  /** Whether a request has gone unanswered within the timeout, so far: the downstream may be hung. */
  readonly timedOut: boolean;
  close(): void;
}

export function createPeer(url: URL, secret: string | undefined, timeoutMs: number): Peer {
  const agent = keepAliveAgent();
  const path = `${url.pathname}${url.search}`;
  let timedOut = false;
  /** The answer, or NoAnswer saying what came instead; a timeout is remembered. */
  const answerOf = (result: Exchange, to: URL): Answer => {
    if (result.kind === 'response') return { status: result.status, headers: result.headers, body: result.body };
    if (result.kind === 'timeout') timedOut = true;
    throw new NoAnswer(whatCame(result, to, timeoutMs));
  };
  return {
    url,
    get timedOut() {
      return timedOut;
    },
    async post(attempt) {
      const body = Buffer.from(attempt.raw ? String(attempt.body) : JSON.stringify(attempt.body));
      const headers: Record<string, string> = {};
      if (attempt.token !== undefined) headers[FENCING_TOKEN_HEADER] = String(attempt.token);
      const signature = signatureOf(attempt.signing ?? 'signed', secret, path, Number(attempt.token ?? 0), body);
      if (signature !== undefined) headers[SIGNATURE_HEADER] = signature;
      return answerOf(await exchange({ method: 'POST', url, body, headers, timeoutMs, agent }), url);
    },
    async postBatch(target, effects, signing = 'signed') {
      const body = Buffer.from(JSON.stringify({ effects }));
      const targetPath = `${target.pathname}${target.search}`;
      const headers: Record<string, string> = {};
      if (secret !== undefined && signing !== 'unsigned') {
        const token = signing === 'signed' ? 'batch' : 1;
        headers[SIGNATURE_HEADER] = signatureHeader(
          secret,
          { method: 'POST', path: targetPath, token, body },
          Date.now(),
        );
      }
      return answerOf(await exchange({ method: 'POST', url: target, body, headers, timeoutMs, agent }), target);
    },
    close() {
      agent.destroy();
    },
  };
}

function signatureOf(
  signing: Signing,
  secret: string | undefined,
  path: string,
  token: number,
  body: Buffer,
): string | undefined {
  const now = Date.now();
  switch (signing) {
    case 'unsigned':
      return undefined;
    case 'signed':
      return secret === undefined ? undefined : signatureHeader(secret, { method: 'POST', path, token, body }, now);
    case 'forged':
      return signatureHeader(`not ${secret ?? ''}`, { method: 'POST', path, token, body }, now);
    case 'other-route':
      return signatureHeader(secret ?? '', { method: 'POST', path: `${path}-elsewhere`, token, body }, now);
    case 'v1': {
      // The first round's scheme: the token and the body, without the method and path.
      const mac = createHmac('sha256', secret ?? '')
        .update(`${now}.${token}.`)
        .update(body)
        .digest('hex');
      return `t=${now},v1=${mac}`;
    }
  }
}

/** What came instead of an answer, as the end of "expected …, got …". */
function whatCame(result: Exclude<Exchange, { kind: 'response' }>, url: URL, timeoutMs: number): string {
  switch (result.kind) {
    case 'timeout':
      return `no answer from ${url.href} within ${timeoutMs} ms`;
    case 'aborted':
      return 'no answer: the run was aborted';
    case 'reset':
      // exchange reports an answer cut before its last byte as a reset with this message.
      return result.message === CUT_MID_ANSWER
        ? 'an answer cut off: the connection closed before its last byte'
        : `no answer: the connection was closed without one (${result.code})`;
    case 'refused':
      return `no connection: ${url.href} could not be reached (${result.code})`;
    case 'network':
      if (result.code === ANSWER_TOO_LARGE) {
        return `an answer over ${DEFAULT_MAX_ANSWER_BYTES / 1024 / 1024} MiB, which conform does not read`;
      }
      // Node's HTTP parser: something answered on the port, but not in HTTP.
      if (result.code.startsWith('HPE_')) return `an answer that is not HTTP (${result.code})`;
      return `no connection: ${url.href} could not be reached (${result.code}: ${result.message})`;
  }
}
