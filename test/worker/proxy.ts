// A proxy in front of a real service (the queue, the gateway) that counts the requests by route and can hold or cut one:
// a request held is passed on only when the test lets it go; a request cut reaches the queue,
// which commits it, and then its connection is closed before the answer is passed back.
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { closeAfterTest } from './setup.js';

export interface QueueProxy {
  url: string;
  /** Requests by `METHOD /path` (ids in the path as `:id`), in the order they arrived. */
  requests: string[];
  /** The queue's answers passed back, `STATUS METHOD /path`, in the order they were passed back. */
  answers: string[];
  /** The bodies of the `POST /finishes` requests, as parsed JSON. */
  batches: Array<{ owner: string; finishes: Array<{ id: string; token: number }>; next?: unknown }>;
  /** The next request to `route` is answered by the queue, then its connection is cut. */
  cutAnswer(route: string): Promise<void>;
  /** The next request to `route` waits for `release()` before it is passed to the queue. */
  hold(route: string): { reached: Promise<void>; release(): void };
  /** Every request to `route` from now on is answered `status` and `body` by the proxy (a service without the route). */
  answer(route: string, status: number, body: unknown): void;
  /**
   * From now on every request is cut before it reaches the queue, as a queue that cannot be
   * reached; `restore()` lets them through again.
   */
  unreachable(): { restore(): void };
}

type Fault = { kind: 'cut'; done(): void } | { kind: 'hold'; reached(): void; released: Promise<void> };

function routeOf(req: IncomingMessage): string {
  const path = (req.url ?? '').split('?')[0]!.replace(/^\/jobs\/[^/]+/, '/jobs/:id');
  return `${req.method} ${path}`;
}

export async function queueProxy(queueUrl: string): Promise<QueueProxy> {
  const target = new URL(queueUrl);
  const agent = new http.Agent({ keepAlive: true });
  const faults = new Map<string, Fault>();
  const requests: string[] = [];
  const answers: string[] = [];
  const batches: QueueProxy['batches'] = [];
  const answered = new Map<string, { status: number; body: unknown }>();
  let reachable = true;

  const server = http.createServer((req: IncomingMessage, res: ServerResponse) => {
    const route = routeOf(req);
    requests.push(route);
    if (!reachable) {
      req.socket.destroy();
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      if (route === 'POST /finishes') batches.push(JSON.parse(body.toString('utf8')) as QueueProxy['batches'][number]);
      const canned = answered.get(route);
      if (canned) {
        answers.push(`${canned.status} ${route}`);
        res.writeHead(canned.status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(canned.body));
        return;
      }
      const fault = faults.get(route);
      faults.delete(route);
      const forward = () => {
        const upstream = http.request(
          { host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers, agent },
          (answer) => {
            const answerChunks: Buffer[] = [];
            answer.on('data', (chunk: Buffer) => answerChunks.push(chunk));
            answer.on('end', () => {
              if (fault?.kind === 'cut') {
                // The queue has answered, so it has committed: the worker never hears of it.
                res.socket?.destroy();
                fault.done();
                return;
              }
              answers.push(`${answer.statusCode} ${route}`);
              res.writeHead(answer.statusCode ?? 502, answer.headers);
              res.end(Buffer.concat(answerChunks));
            });
          },
        );
        upstream.on('error', () => res.socket?.destroy());
        upstream.end(body);
      };
      if (fault?.kind === 'hold') {
        fault.reached();
        void fault.released.then(forward);
      } else forward();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closeAfterTest(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    agent.destroy();
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    answers,
    batches,
    cutAnswer: (route) => new Promise<void>((done) => faults.set(route, { kind: 'cut', done })),
    hold: (route) => {
      let reached!: () => void;
      let release!: () => void;
      const reachedP = new Promise<void>((resolve) => (reached = resolve));
      const released = new Promise<void>((resolve) => (release = resolve));
      faults.set(route, { kind: 'hold', reached, released });
      return { reached: reachedP, release };
    },
    answer: (route, status, body) => void answered.set(route, { status, body }),
    unreachable: () => {
      reachable = false;
      return { restore: () => void (reachable = true) };
    },
  };
}
