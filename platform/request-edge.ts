// The start of every service's app: an express app as the services want it (no X-Powered-By,
// no ETags, the cheaper res.json) and one first middleware doing what each request needs before
// any route: its id, its count and time in the metrics, its line in the request log. One
// middleware with one listener for the answer's end costs less than three of each.
import express, { type Express, type RequestHandler } from 'express';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { logAnswer } from './http-edge.js';
import { cheapJson } from './json-response.js';
import { requestSeries } from './metrics.js';
import { runWithRequestId } from './request-id.js';

/** An express app without X-Powered-By and ETags (every answer is fresh JSON), with the cheaper res.json. */
export function serviceApp(): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  cheapJson(app);
  return app;
}

/**
 * requestIds, requestMetrics and requestLog in one middleware, the first of the app: the same
 * header, series and log lines. The request is counted when it is answered or, if the caller
 * hangs up first, when the connection closes (status `closed`); it is logged when answered.
 */
export function requestEdge(registry: Registry, logger: Logger): RequestHandler {
  const count = requestSeries(registry);
  return (req, res, next) => {
    const started = process.hrtime.bigint();
    let counted = false;
    const once = () => {
      if (counted) return;
      counted = true;
      count(req, res, started);
    };
    res.on('finish', () => {
      once();
      logAnswer(logger, req, res, started);
    });
    res.on('close', once);
    runWithRequestId(req, res, next);
  };
}
