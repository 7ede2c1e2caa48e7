#!/usr/bin/env node
// A floor for scripts/route-cost.mjs: GET /healthz answered `{"ok":true}` by bare node:http
// (`http`) or by express alone (`express`: no middleware, ETags and X-Powered-By off, as the
// services have them), so a route's CPU can be read against what the HTTP stack costs by itself.
//
//   node scripts/route-floor.mjs http|express     # prints "listening on http://127.0.0.1:<port>"
import { createServer } from 'node:http';
import express from 'express';

const kind = process.argv[2];
const BODY = JSON.stringify({ ok: true });
let handler;
if (kind === 'http') {
  handler = (req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(req.url === '/healthz' ? 200 : 404, {
        'content-type': 'application/json; charset=utf-8',
        'content-length': Buffer.byteLength(BODY),
      });
      res.end(BODY);
    });
  };
} else if (kind === 'express') {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.get('/healthz', (_req, res) => {
    res.json({ ok: true });
  });
  handler = app;
} else {
  console.error('usage: node scripts/route-floor.mjs http|express');
  process.exit(2);
}
const server = createServer(handler).listen(0, '127.0.0.1', () => {
  console.log(`listening on http://127.0.0.1:${server.address().port}`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
