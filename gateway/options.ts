// The gateway's options: defaults in one object, one function that checks ranges and
// relations, and a resolved type that everything inside the gateway takes.
import pino, { type Logger } from 'pino';
import type { Registry } from 'prom-client';
import { checkClock, type Clock } from '../platform/clock.js';
import { describeValue } from '../platform/describe-value.js';
import { checkApiKey } from '../platform/exchange.js';
import { httpUrl } from '../platform/url.js';
import { resolveDownstreams, type Downstream, type DownstreamOptions } from './downstreams.js';
import type { RetryPolicy } from './rules.js';
import type { OptionNames } from '../platform/option-names.js';

export const GATEWAY_DEFAULTS = {
  receiverTimeoutMs: 2_000,
  queueTimeoutMs: 2_000,
  retryAttempts: 3,
  retryBudgetMs: 10_000,
  backoffBaseMs: 100,
  backoffMaxMs: 2_000,
} as const;

export interface GatewayOptions {
  /** The queue's base URL; the gateway calls its `POST /jobs/:id/verify`. */
  queueUrl: string;
  /**
   * The receiver's base URL; the gateway calls its `POST /effects`. It is the downstream named
   * `receiver`, where a send without `to` goes.
   */
  receiverUrl?: string | undefined;
  /** The receiver's own secret, when it is not `secret`. */
  receiverSecret?: string | undefined;
  /** More downstreams by name, each with its effect endpoint (path included) and its own secret. */
  downstreams?: Readonly<Record<string, DownstreamOptions>> | undefined;
  /** Shared with the downstreams that have no secret of their own: each forwarded request is signed. Undefined sends unsigned. */
  secret?: string | undefined;
  /**
   * Required of the gateway's own callers (`Authorization: Bearer <apiKey>` on every route but
   * /healthz) and presented to the queue with every lease check: one key for both.
   */
  apiKey?: string | undefined;
  /** How long one attempt waits for the receiver (default 2000). */
  receiverTimeoutMs?: number | undefined;
  /** How long one verify waits for the queue (default 2000). */
  queueTimeoutMs?: number | undefined;
  /** Attempts per send, the first included (default 3). */
  retryAttempts?: number | undefined;
  /** Attempts start, and are cut off, within this long after the send began (default 10000). */
  retryBudgetMs?: number | undefined;
  /** First backoff before jitter (default 100); doubles per attempt up to `backoffMaxMs` (default 2000). */
  backoffBaseMs?: number | undefined;
  backoffMaxMs?: number | undefined;
  /** Default: silent. */
  logger?: Logger | undefined;
  /** Default: Date.now. Used for the retry budget and signature timestamps. */
  clock?: Clock | undefined;
  /** Default: Math.random. Used for backoff jitter. */
  random?: (() => number) | undefined;
  /** The registry GET /metrics serves; a fresh one by default. One app per registry. */
  metrics?: Registry | undefined;
}

/** Every name GatewayOptions has; startGateway refuses any other. */
export const GATEWAY_OPTION_NAMES: OptionNames<GatewayOptions> = {
  queueUrl: true,
  receiverUrl: true,
  receiverSecret: true,
  downstreams: true,
  secret: true,
  apiKey: true,
  receiverTimeoutMs: true,
  queueTimeoutMs: true,
  retryAttempts: true,
  retryBudgetMs: true,
  backoffBaseMs: true,
  backoffMaxMs: true,
  logger: true,
  clock: true,
  random: true,
  metrics: true,
};

export interface ResolvedGatewayOptions {
  queueUrl: URL;
  /** By name; a send's `to` picks one, `receiver` when it names none. */
  downstreams: ReadonlyMap<string, Downstream>;
  secret: string | undefined;
  apiKey: string | undefined;
  queueTimeoutMs: number;
  retry: RetryPolicy;
  logger: Logger;
  clock: Clock;
  random: () => number;
}

export function resolveGatewayOptions(options: GatewayOptions): ResolvedGatewayOptions {
  const receiverTimeoutMs = positiveInt(
    'receiverTimeoutMs',
    options.receiverTimeoutMs ?? GATEWAY_DEFAULTS.receiverTimeoutMs,
  );
  const retryBudgetMs = positiveInt('retryBudgetMs', options.retryBudgetMs ?? GATEWAY_DEFAULTS.retryBudgetMs);
  if (retryBudgetMs < receiverTimeoutMs) {
    throw new RangeError(
      `retryBudgetMs (${retryBudgetMs}) must be at least receiverTimeoutMs (${receiverTimeoutMs}), or not even the first attempt could wait its full timeout.`,
    );
  }
  const backoffBaseMs = positiveInt('backoffBaseMs', options.backoffBaseMs ?? GATEWAY_DEFAULTS.backoffBaseMs);
  const backoffMaxMs = positiveInt('backoffMaxMs', options.backoffMaxMs ?? GATEWAY_DEFAULTS.backoffMaxMs);
  if (backoffMaxMs < backoffBaseMs) {
    throw new RangeError(`backoffMaxMs (${backoffMaxMs}) must be at least backoffBaseMs (${backoffBaseMs}).`);
  }
  for (const [name, value] of [
    ['secret', options.secret],
    ['receiverSecret', options.receiverSecret],
  ] as const) {
    if (value !== undefined && typeof value !== 'string') {
      throw new TypeError(`${name} must be a string, not ${describeValue(value)}.`);
    }
  }
  if (options.secret === '') {
    throw new RangeError('secret must not be empty; leave it out to forward unsigned requests.');
  }
  const given = options.downstreams ?? {};
  if (typeof given !== 'object' || given === null || Array.isArray(given)) {
    throw new TypeError(`downstreams must be an object of {url, secret?} by name, not ${describeValue(given)}.`);
  }
  if (options.receiverSecret === '') {
    throw new RangeError("receiverSecret must not be empty; leave it out to use the gateway's secret.");
  }
  const downstreams = resolveDownstreams(options.receiverUrl, given, options.secret, options.receiverSecret);
  if (downstreams.size === 0) {
    throw new RangeError(
      'receiverUrl is required, or at least one of downstreams: the gateway needs somewhere to forward to.',
    );
  }
  return {
    queueUrl: httpUrl('queueUrl', options.queueUrl),
    downstreams,
    secret: options.secret,
    apiKey: options.apiKey === undefined ? undefined : checkApiKey(options.apiKey),
    queueTimeoutMs: positiveInt('queueTimeoutMs', options.queueTimeoutMs ?? GATEWAY_DEFAULTS.queueTimeoutMs),
    retry: {
      attempts: positiveInt('retryAttempts', options.retryAttempts ?? GATEWAY_DEFAULTS.retryAttempts),
      budgetMs: retryBudgetMs,
      receiverTimeoutMs,
      backoffBaseMs,
      backoffMaxMs,
    },
    logger: options.logger ?? pino({ level: 'silent' }),
    clock: checkClock(options.clock),
    random: options.random ?? Math.random,
  };
}

function positiveInt(name: string, value: number): number {
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new RangeError(`${name} must be a positive integer, not ${String(value)}.`);
  }
  return value;
}
