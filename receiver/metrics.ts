// The receiver's own metrics: every judged effect by outcome (and those of keyed effects apart),
// the sizes of the bodies judged, and the signatures refused. fencedEffects counts through
// EffectMetrics, so a downstream that mounts it can count too.
import { Counter, Histogram, type Registry } from 'prom-client';
import { MAX_BODY_BYTES, serializedBytes } from '../platform/effect-fields.js';
import type { EffectRequest, Outcome } from './rules.js';

/** What fencedEffects reports as it judges; `effectMetrics` makes one on a prom-client registry. */
export interface EffectMetrics {
  /** `request` (its key and body) is optional, so a counter of outcomes alone still fits. */
  judged(outcome: Outcome, request?: Pick<EffectRequest, 'key' | 'body'>): void;
  signatureRefused(): void;
}

const OUTCOMES: readonly Outcome[] = ['applied', 'duplicate', 'fenced', 'conflict'];

/** From 64 bytes to the 64 KiB limit, by factors of 4. */
const BODY_BUCKETS = [64, 256, 1024, 4096, 16_384, MAX_BODY_BYTES];

export function effectMetrics(registry: Registry): EffectMetrics {
  const effects = new Counter({
    name: 'leasehold_receiver_effects_total',
    help: 'Effect requests judged, by outcome: applied, duplicate (nothing added), fenced (a lower token), conflict (another qty or body).',
    labelNames: ['outcome'] as const,
    registers: [registry],
  });
  // The key itself is no label: a job may have many, and each would be a series of its own.
  const keyed = new Counter({
    name: 'leasehold_receiver_keyed_effects_total',
    help: 'Requests for a keyed effect (one with a `key`) judged, by outcome; also counted in leasehold_receiver_effects_total.',
    labelNames: ['outcome'] as const,
    registers: [registry],
  });
  // Every outcome is shown from the start, at zero: a rate of fenced effects needs the series.
  for (const outcome of OUTCOMES) {
    effects.inc({ outcome }, 0);
    keyed.inc({ outcome }, 0);
  }
  const bodies = new Histogram({
    name: 'leasehold_receiver_effect_body_bytes',
    help: 'Bodies of the effect requests judged, serialized as JSON, in bytes (at most 65536).',
    buckets: BODY_BUCKETS,
    registers: [registry],
  });
  const refusals = new Counter({
    name: 'leasehold_receiver_signature_refusals_total',
    help: 'Effect requests refused 401 invalid_signature (missing, malformed, forged, altered or out of time).',
    registers: [registry],
  });
  return {
    judged: (outcome, request) => {
      effects.inc({ outcome });
      if (request?.key !== undefined) keyed.inc({ outcome });
      if (request?.body !== undefined) bodies.observe(serializedBytes(request.body));
    },
    signatureRefused: () => refusals.inc(),
  };
}
