// Forwards effects to one downstream: `POST` to its effect endpoint, stamped with the verified
// fencing token and, when it has a secret, signed with the receiver's own signing module over the
// method, the endpoint's path and the exact bytes sent. One keep-alive agent per forwarder, so
// retries and busy workers reuse connections.
//
// A downstream that answers with `Leasehold-Batch: <target>` (leasehold's receiver and
// fencedEffects do) takes batches there: from then on, effects forwarded while another forward
// to it is on its way wait for it, then go together in one batch request (batch-forward.ts). A
// lone effect always goes at once, as a single request; a downstream that does not say so only
// ever gets single requests, as many at once as there are sends.
import type { Logger } from 'pino';
import { FENCING_TOKEN_HEADER, readBatchOffer, SIGNATURE_HEADER, signatureHeader } from '../receiver/signature.js';
import { randomUUID } from 'node:crypto';
import { exchange, keepAliveAgent, type Exchange } from '../platform/exchange.js';
import { timed } from '../platform/metrics.js';
import { REQUEST_ID_HEADER } from '../platform/request-id.js';
import { redactUrl } from '../platform/url.js';
import { BatchQueue, type BatchSender } from './batch-forward.js';
import { checkRequiredOptions, type OptionNames } from '../platform/option-names.js';

export interface ForwarderOptions {
  /** The downstream's effect endpoint, path included (a receiver's is `<base>/effects`). */
  endpoint: URL;
  secret: string | undefined;
  /** Read for each attempt, so every signature carries a fresh timestamp. */
  now: () => number;
  /** Default true: batch to a downstream that offers batches. False: single requests only. */
  batching?: boolean;
  /** Told when a downstream offers a batch target on another origin, which is not used. */
  logger?: Pick<Logger, 'warn'>;
  /** Told how long each request to the downstream took, in seconds, whatever its outcome. */
  observe?: (seconds: number) => void;
}

/** What a downstream is sent: the fields the send gave, and only those. */
export interface ForwardedEffect {
  jobId: string;
  key?: string | undefined;
  qty?: number | undefined;
  body?: unknown;
}

/**
 * An attempt's result: the exchange of a single request, or this effect's own answer out of a
 * batch's (a `response` with the status and body the batch gave it), the batch's own failure
 * (timeout, reset, 5xx...) for each of its effects, or `bad_batch`: a batch answered outside the
 * protocol, so no effect of it can be told applied.
 */
export type ForwardResult = Exchange | BadBatch;

export interface BadBatch {
  kind: 'bad_batch';
  /** The batch's status, and its error code when it had one. */
  status: number;
  code?: string;
  /** What was wrong with the answer, as a clause: "answered 200 without one result per effect". */
  problem: string;
}

export interface ForwardOptions {
  signal?: AbortSignal | undefined;
  /** Sent as a single request, never waiting for a batch: a retry, which should not ride with others. */
  alone?: boolean;
}

/** Forward requests made and effects they carried: the figures behind "effects per request". */
export interface ForwardCounts {
  requests: number;
  effects: number;
}

export interface Forwarder {
  forward(effect: ForwardedEffect, token: number, timeoutMs: number, options?: ForwardOptions): Promise<ForwardResult>;
  readonly counts: ForwardCounts;
  /** The batch target in use, when the downstream offers one. */
  batchTarget(): URL | undefined;
  close(): void;
}

/** A downstream's answer is an outcome and an effect, or an error: its body (64 KiB at most) and a little more. */
const MAX_ANSWER_BYTES = 1024 * 1024;
/** A batch's answer holds up to 100 of those. */
const MAX_BATCH_ANSWER_BYTES = 16 * 1024 * 1024;

/** The header a downstream names its batch target in (lower-case, as Node presents it). */
export const BATCH_OFFER_HEADER = 'leasehold-batch';

const FORWARDER_OPTION_NAMES: OptionNames<ForwarderOptions> = {
  endpoint: true,
  secret: true,
  now: true,
  batching: true,
  logger: true,
  observe: true,
};

export function createForwarder(options: ForwarderOptions): Forwarder {
  checkRequiredOptions('createForwarder', options, FORWARDER_OPTION_NAMES);
  const { endpoint, secret, now } = options;
  const agent = keepAliveAgent();
  const url = new URL(endpoint.href);
  url.hash = '';
  // The request target as it goes on the wire, which is what the downstream checks the signature against.
  const path = `${url.pathname}${url.search}`;
  const counts: ForwardCounts = { requests: 0, effects: 0 };
  const timedExchange = (request: Parameters<typeof exchange>[0]): Promise<Exchange> =>
    timed(() => exchange(request), options.observe);
  let batchUrl: URL | undefined;
  let refusedOffer: string | undefined;

  /**
   * Each answer of a single request says whether the downstream takes batches, and where. An
   * offer nobody may send batches to (empty, not a URL, another origin) is not used, and said
   * once in the log; effects then go one at a time.
   */
  const learn = (result: Exchange) => {
    if (options.batching === false || result.kind !== 'response' || result.status >= 500) return;
    const offered = result.headers[BATCH_OFFER_HEADER];
    const offer = readBatchOffer(offered, url);
    batchUrl = offer && 'target' in offer ? offer.target : undefined;
    if (offer && 'problem' in offer && refusedOffer !== offered) {
      refusedOffer = offered as string;
      options.logger?.warn(
        { endpoint: redactUrl(url), offered, problem: offer.problem },
        'the downstream offers a batch target that cannot be used; effects go one at a time',
      );
    }
  };

  const single = async (effect: ForwardedEffect, token: number, timeoutMs: number, signal?: AbortSignal) => {
    const body = Buffer.from(JSON.stringify(wireEffect(effect)));
    const headers: Record<string, string> = { [FENCING_TOKEN_HEADER]: String(token) };
    if (secret !== undefined) {
      headers[SIGNATURE_HEADER] = signatureHeader(secret, { method: 'POST', path, token, body }, now());
    }
    counts.requests += 1;
    counts.effects += 1;
    const result = await timedExchange({
      method: 'POST',
      url,
      body,
      headers,
      timeoutMs,
      agent,
      signal,
      maxAnswerBytes: MAX_ANSWER_BYTES,
    });
    learn(result);
    return result;
  };

  const sender: BatchSender = {
    single,
    batchUrl: () => batchUrl,
    batch: (target, body, size, timeoutMs, requestId) => {
      // Never the id of whichever send's call happens to be draining the queue.
      const headers: Record<string, string> = { [REQUEST_ID_HEADER]: requestId ?? `batch-${randomUUID()}` };
      const targetPath = `${target.pathname}${target.search}`;
      if (secret !== undefined) {
        headers[SIGNATURE_HEADER] = signatureHeader(
          secret,
          { method: 'POST', path: targetPath, token: 'batch', body },
          now(),
        );
      }
      counts.requests += 1;
      counts.effects += size;
      return timedExchange({
        method: 'POST',
        url: target,
        body,
        headers,
        timeoutMs,
        agent,
        maxAnswerBytes: MAX_BATCH_ANSWER_BYTES,
      });
    },
  };
  const queue = new BatchQueue(sender);

  return {
    counts,
    batchTarget: () => batchUrl,
    forward(effect, token, timeoutMs, forwardOptions = {}) {
      const { signal, alone } = forwardOptions;
      if (alone || batchUrl === undefined) return single(effect, token, timeoutMs, signal);
      return queue.forward(wireEffect(effect), token, timeoutMs, signal);
    },
    close() {
      queue.close();
      agent.destroy();
    },
  };
}

/** `{jobId, key, qty, body}` in that order, without the fields the send left out. */
export function wireEffect(effect: ForwardedEffect): ForwardedEffect {
  return {
    jobId: effect.jobId,
    ...(effect.key !== undefined ? { key: effect.key } : {}),
    ...(effect.qty !== undefined ? { qty: effect.qty } : {}),
    ...(effect.body !== undefined ? { body: effect.body } : {}),
  };
}
