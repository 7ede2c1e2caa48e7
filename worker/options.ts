// The worker's options: defaults in one object, one function that checks ranges and relations;
// everything inside the worker takes only the resolved shape.
import { systemClock, type Clock } from '../platform/clock.js';
import { httpUrl } from '../platform/url.js';
import type { WorkerEvent } from './events.js';
import { heartbeatIntervalMs } from './rules.js';
import type { EffectSender, QueueApi, WorkerHooks } from './types.js';

export const WORKER_DEFAULTS = {
  leaseMs: 30_000,
  pollMs: 500,
  drainMs: 10_000,
} as const;

/** The shortest lease a worker accepts: below it the 100 ms heartbeat floor leaves no margin. */
export const MIN_LEASE_MS = 300;
const MAX_LEASE_MS = 7 * 24 * 60 * 60 * 1000;

export interface WorkerOptions {
  /** The queue's base URL. */
  queueUrl: string;
  /** The gateway's base URL: every effect goes through it. */
  gatewayUrl: string;
  /** The owner name this worker claims as. */
  name: string;
  /** How long each claim asks for (default 30000, at least 300). Renewals extend by as much. */
  leaseMs?: number;
  /** How long to wait before claiming again when nothing was claimable (default 500). */
  pollMs?: number;
  /** After a stop, how long the job in hand may still run before it is abandoned (default 10000). */
  drainMs?: number;
  /**
   * How long a send already on its way may take to answer after the lease is lost, before the
   * handler's signal aborts it (default: the heartbeat interval, at least 1000).
   */
  sendGraceMs?: number;
  onEvent?: (event: WorkerEvent) => void;
  hooks?: WorkerHooks;
  /** The worker's clock, for its estimate of the lease's end. Never decides validity. */
  clock?: Clock;
  /** Replace the HTTP clients (tests put faults between the worker and a service). */
  queue?: QueueApi;
  gateway?: EffectSender;
}

export interface ResolvedWorkerOptions {
  queueUrl: URL;
  gatewayUrl: URL;
  name: string;
  leaseMs: number;
  /** Timer renewals: every `max(100, floor(leaseMs / 3))` ms. */
  heartbeatMs: number;
  /** Pause between attempts after a renewal, finish or fail failed to reach the queue. */
  retryMs: number;
  pollMs: number;
  drainMs: number;
  sendGraceMs: number;
  onEvent: (event: WorkerEvent) => void;
  hooks: WorkerHooks;
  clock: Clock;
  queue: QueueApi | undefined;
  gateway: EffectSender | undefined;
}

export function resolveWorkerOptions(options: WorkerOptions): ResolvedWorkerOptions {
  const name = options.name;
  if (typeof name !== 'string' || name.length === 0 || name.length > 256) {
    throw new RangeError(`name must be a non-empty string of at most 256 characters, not ${JSON.stringify(name)}.`);
  }
  const leaseMs = intIn('leaseMs', options.leaseMs ?? WORKER_DEFAULTS.leaseMs, MIN_LEASE_MS, MAX_LEASE_MS);
  const heartbeatMs = heartbeatIntervalMs(leaseMs);
  return {
    queueUrl: httpUrl('queueUrl', options.queueUrl),
    gatewayUrl: httpUrl('gatewayUrl', options.gatewayUrl),
    name,
    leaseMs,
    heartbeatMs,
    retryMs: Math.max(25, Math.floor(heartbeatMs / 4)),
    pollMs: intIn('pollMs', options.pollMs ?? WORKER_DEFAULTS.pollMs, 10, 3_600_000),
    drainMs: intIn('drainMs', options.drainMs ?? WORKER_DEFAULTS.drainMs, 0, MAX_LEASE_MS),
    sendGraceMs: intIn('sendGraceMs', options.sendGraceMs ?? Math.max(heartbeatMs, 1_000), 0, MAX_LEASE_MS),
    onEvent: options.onEvent ?? (() => {}),
    hooks: options.hooks ?? {},
    clock: options.clock ?? systemClock,
    queue: options.queue,
    gateway: options.gateway,
  };
}

function intIn(what: string, value: number, min: number, max: number): number {
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new RangeError(`${what} must be an integer from ${min} to ${max}, not ${String(value)}.`);
  }
  return value;
}
