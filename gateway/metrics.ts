// The gateway's own metrics: sends by outcome, the retries they took, the lease checks behind
// them — how many checks, and how many queue requests carried them (they coalesce) — and the
// forward requests to each downstream with the effects they carried (they batch).
import { Counter, Histogram, type Registry } from 'prom-client';
import { countedElsewhere, LATENCY_BUCKETS } from '../platform/metrics.js';

export interface SendMetrics {
  /**
   * One send ended: `applied` or `duplicate`, the refusal's error code, or `abandoned` when the
   * caller hung up; `attempts` forwarding attempts were made (retries are the ones after the first).
   * `downstream` is the configured downstream it was for, when it named one.
   */
  sent(outcome: string, attempts: number, downstream?: string): void;
}

/** One of the gateway's own requests: a lease check at the queue, or a forward to a downstream (by its name). */
export type UpstreamCall = { call: 'lease_check'; upstream: 'queue' } | { call: 'forward'; upstream: string };

/**
 * How long the gateway waited for its own requests: `observe(call, seconds)` takes one, from
 * sending it to reading its answer (or giving up).
 */
export function upstreamTimes(registry: Registry): (call: UpstreamCall, seconds: number) => void {
  const waited = new Histogram({
    name: 'leasehold_gateway_upstream_request_duration_seconds',
    help: 'Time the gateway waited for its own requests, from sending one to reading its answer or giving up: call="lease_check" at the queue, call="forward" to the downstream named by upstream. Less the queue\'s or the downstream\'s own time for the request, the rest is the way there and back.',
    labelNames: ['call', 'upstream'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  });
  return (call, seconds) => waited.observe(call, seconds);
}

/** Forward requests made to one downstream and the effects they carried (Forwarder.counts). */
export interface ForwardFigures {
  downstream: string;
  requests: number;
  effects: number;
}

/**
 * `checks` reads the lease checker's running counts (CoalescingVerifier.counts), `forwards` each
 * downstream forwarder's.
 */
export function gatewayMetrics(
  registry: Registry,
  checks: () => { requests: number; checks: number },
  forwards: () => readonly ForwardFigures[] = () => [],
): SendMetrics {
  const sends = new Counter({
    name: 'leasehold_gateway_sends_total',
    help: 'Sends by outcome: applied, duplicate, or the error code they were refused with (stale_lease, fenced, upstream_unavailable...), or abandoned by the caller.',
    labelNames: ['outcome'] as const,
    registers: [registry],
  });
  // A series of its own rather than a label on the one above, whose series keep their names.
  const byDownstream = new Counter({
    name: 'leasehold_gateway_downstream_sends_total',
    help: 'Sends by the downstream they were for and their outcome (as in leasehold_gateway_sends_total); a send naming no configured downstream is not counted here.',
    labelNames: ['downstream', 'outcome'] as const,
    registers: [registry],
  });
  const retries = new Counter({
    name: 'leasehold_gateway_retries_total',
    help: 'Forwarding attempts after the first, each made after the lease verified again.',
    registers: [registry],
  });
  countedElsewhere(
    registry,
    'leasehold_gateway_lease_checks_total',
    'Lease checks made with the queue: one before the first attempt of each send, one before each retry.',
    () => checks().checks,
  );
  countedElsewhere(
    registry,
    'leasehold_gateway_lease_check_requests_total',
    'Queue requests that carried those checks: overlapping sends share one POST /verifications.',
    () => checks().requests,
  );
  // Both read at collection: with sends by downstream above, "effects per request" is their ratio.
  const perDownstream = (name: string, help: string, read: (figures: ForwardFigures) => number) =>
    new Counter({
      name,
      help,
      labelNames: ['downstream'] as const,
      registers: [registry],
      collect() {
        this.reset();
        for (const figures of forwards()) this.inc({ downstream: figures.downstream }, read(figures));
      },
    });
  perDownstream(
    'leasehold_gateway_forward_requests_total',
    'HTTP requests the gateway made to each downstream to forward effects: single effects, and batches to a downstream that offers them.',
    (figures) => figures.requests,
  );
  perDownstream(
    'leasehold_gateway_forwarded_effects_total',
    'Effects those requests carried (retries included); divided by leasehold_gateway_forward_requests_total, the effects per request.',
    (figures) => figures.effects,
  );
  return {
    sent(outcome, attempts, downstream) {
      sends.inc({ outcome });
      if (downstream !== undefined) byDownstream.inc({ downstream, outcome });
      if (attempts > 1) retries.inc(attempts - 1);
    },
  };
}
