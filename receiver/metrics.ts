// The receiver's own metrics: every judged effect by outcome, and the signatures refused.
// fencedEffects counts through EffectMetrics, so a downstream that mounts it can count too.
import { Counter, type Registry } from 'prom-client';
import type { Outcome } from './rules.js';

/** What fencedEffects reports as it judges; `effectMetrics` makes one on a prom-client registry. */
export interface EffectMetrics {
  judged(outcome: Outcome): void;
  signatureRefused(): void;
}

const OUTCOMES: readonly Outcome[] = ['applied', 'duplicate', 'fenced', 'conflict'];

export function effectMetrics(registry: Registry): EffectMetrics {
  const effects = new Counter({
    name: 'leasehold_receiver_effects_total',
    help: 'Effect requests judged, by outcome: applied, duplicate (nothing added), fenced (a lower token), conflict (another qty).',
    labelNames: ['outcome'] as const,
    registers: [registry],
  });
  // Every outcome is shown from the start, at zero: a rate of fenced effects needs the series.
  for (const outcome of OUTCOMES) effects.inc({ outcome }, 0);
  const refusals = new Counter({
    name: 'leasehold_receiver_signature_refusals_total',
    help: 'Effect requests refused 401 invalid_signature (missing, malformed, forged, altered or out of time).',
    registers: [registry],
  });
  return {
    judged: (outcome) => effects.inc({ outcome }),
    signatureRefused: () => refusals.inc(),
  };
}
