// Reference servers for the benchmark, each a child process: the queue's store, or the
// gateway's verify-then-forward, behind a bare node:http handler — no express, no body-parser,
// no schemas, no logger. They serve only the happy path the benchmark drives, and show how much
// of what HTTP costs is HTTP itself on this machine, and how much is the services' own code.
//
//   node bare-front.js queue --db FILE
//   node bare-front.js gateway --queue URL --receiver URL
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import { createForwarder } from '../gateway/index.js';
import { urlUnder } from '../platform/exchange.js';
import { openQueueStore, QueueClient, type QueueStore } from '../queue/index.js';

type Handler = (method: string, path: string, body: unknown) => Promise<{ status: number; body?: unknown }>;

function queueFront(store: QueueStore): Handler {
  return async (method, path, body) => {
    const input = body as {
      owner: string;
      token: number;
      leaseMs?: number;
      max?: number;
      next?: true | { leaseMs?: number };
    };
    if (method === 'POST' && path === '/claims') {
      const leases = await store.claimMany(input.owner, input.leaseMs ?? 30_000, input.max ?? 1);
      if (leases.length === 0) return { status: 204 };
      return { status: 200, body: input.max === undefined ? { lease: leases[0] } : { leases } };
    }
    const finish = /^\/jobs\/([^/]+)\/finish$/.exec(path);
    if (method === 'POST' && finish) {
      const id = decodeURIComponent(finish[1]!);
      const presented = { owner: input.owner, token: input.token };
      if (!input.next) return { status: 200, body: { job: await store.finish(id, presented, null) } };
      const leaseMs = input.next === true ? undefined : input.next.leaseMs;
      return { status: 200, body: await store.finishAndClaim(id, presented, null, leaseMs) };
    }
    return {
      status: 404,
      body: { error: { code: 'not_found', message: `The bare queue front serves no ${method} ${path}.` } },
    };
  };
}

function gatewayFront(queue: QueueClient, receiverUrl: URL): Handler {
  const forwarder = createForwarder({ endpoint: urlUnder(receiverUrl, ['effects']), secret: undefined, now: Date.now });
  return async (method, path, body) => {
    if (method !== 'POST' || path !== '/send') {
      return {
        status: 404,
        body: { error: { code: 'not_found', message: `The bare gateway serves no ${method} ${path}.` } },
      };
    }
    const send = body as { jobId: string; owner: string; token: number; qty: number };
    const lease = await queue.verify(send.jobId, { owner: send.owner, token: send.token });
    if (lease.qty !== send.qty)
      return { status: 422, body: { error: { code: 'qty_mismatch', message: 'qty is not the job qty.' } } };
    const result = await forwarder.forward({ jobId: send.jobId, qty: send.qty }, lease.token, 10_000);
    if (result.kind !== 'response') throw new Error(`the receiver did not answer: ${result.kind}`);
    return { status: result.status === 201 ? 200 : result.status, body: result.body };
  };
}

function serve(handle: Handler): http.Server {
  return http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const answer = (status: number, body?: unknown) => {
        const text = body === undefined ? '' : JSON.stringify(body);
        res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
        res.end(text);
      };
      Promise.resolve()
        .then(() =>
          handle(
            req.method ?? 'GET',
            req.url ?? '/',
            chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : {},
          ),
        )
        .then(
          ({ status, body }) => answer(status, body),
          (err: unknown) =>
            answer(500, { error: { code: 'internal', message: err instanceof Error ? err.message : String(err) } }),
        );
    });
  });
}

async function main(): Promise<void> {
  const { positionals, values } = parseArgs({
    allowPositionals: true,
    options: { db: { type: 'string' }, queue: { type: 'string' }, receiver: { type: 'string' } },
  });
  const closers: (() => Promise<void> | void)[] = [];
  let handle: Handler;
  if (positionals[0] === 'queue' && values.db) {
    const store = await openQueueStore({ db: values.db });
    closers.push(() => store.close());
    handle = queueFront(store);
  } else if (positionals[0] === 'gateway' && values.queue && values.receiver) {
    const queue = new QueueClient(values.queue);
    closers.push(() => queue.close());
    handle = gatewayFront(queue, new URL(values.receiver));
  } else {
    throw new Error('usage: bare-front.js queue --db FILE | gateway --queue URL --receiver URL');
  }
  const server = serve(handle);
  server.keepAliveTimeout = 5_000;
  server.listen(0, '127.0.0.1', () => {
    process.stdout.write(`listening on http://127.0.0.1:${(server.address() as AddressInfo).port}\n`);
  });
  process.once('SIGTERM', () => {
    server.close();
    server.closeAllConnections();
    void Promise.all(closers.map((close) => close())).finally(() => process.exit(0));
  });
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
