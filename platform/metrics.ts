// Prometheus metrics, the part every service shares: one registry per app (a process may hold
// many apps, tests above all, so nothing goes to prom-client's global registry), the requests
// and latency of every route labelled by its pattern, and the `GET /metrics` route.
import type { Request, RequestHandler, Response } from 'express';
import { Counter, Histogram, Registry } from 'prom-client';
import type { ServiceName } from './logger.js';

/** A fresh registry whose every series carries `service`, so the three services' series never mix. */
export function createRegistry(service: ServiceName): Registry {
  const registry = new Registry();
  registry.setDefaultLabels({ service });
  return registry;
}

/** Latency buckets in seconds, from a cached read to a long-polling claim (30 s at most). */
export const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/** The route label of a request no route answered: an unknown path, or a body refused before routing. */
export const NO_ROUTE = '(none)';

/**
 * The two request series (count by method, route pattern and status; latency by method and
 * route pattern), and how one request is counted in them: once, when answered or closed. The
 * route is the pattern (`/jobs/:id/finish`), never the path, so job ids do not make a series each.
 */
export function requestSeries(registry: Registry): (req: Request, res: Response, started: bigint) => void {
  const requests = new Counter({
    name: 'leasehold_http_requests_total',
    help: 'Requests answered, by method, route pattern and status.',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [registry],
  });
  const latency = new Histogram({
    name: 'leasehold_http_request_duration_seconds',
    help: 'Time from the request to the end of its answer, by method and route pattern.',
    labelNames: ['method', 'route'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  });
  return (req, res, started) => {
    const method = req.method;
    const route = routeOf(req);
    const status = res.writableFinished ? String(res.statusCode) : 'closed';
    requests.inc({ method, route, status });
    latency.observe({ method, route }, Number(process.hrtime.bigint() - started) / 1e9);
  };
}

/** The pattern of the route that answered, mount path included, or NO_ROUTE. */
export function routeOf(req: Request): string {
  const path = (req.route as { path?: unknown } | undefined)?.path;
  return typeof path === 'string' ? `${req.baseUrl}${path}` : NO_ROUTE;
}

/** `GET /metrics`: the registry in Prometheus' text format, its series collected now. */
export function metricsRoute(registry: Registry): RequestHandler {
  return async (_req: Request, res: Response) => {
    const text = await registry.metrics();
    res.set('Content-Type', registry.contentType).send(text);
  };
}

/**
 * A counter whose value is read, at each scrape, from a running total kept elsewhere (a store's
 * transaction count): prom-client counters cannot be set, so the value is put back from zero.
 */
export function countedElsewhere(registry: Registry, name: string, help: string, read: () => number): Counter {
  return new Counter({
    name,
    help,
    registers: [registry],
    collect() {
      this.reset();
      this.inc(read());
    },
  });
}

/** `call`'s outcome, telling `observe` how long it took in seconds, whether it resolved or rejected. */
export async function timed<T>(call: () => Promise<T>, observe: ((seconds: number) => void) | undefined): Promise<T> {
  if (!observe) return call();
  const started = performance.now();
  try {
    return await call();
  } finally {
    observe((performance.now() - started) / 1000);
  }
}
