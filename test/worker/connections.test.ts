// The worker's kept-alive connections against a server in another thread, whose idle connections
// it closes after 100 ms: reused while fresh, and never after a pause — the hazard a plain
// keep-alive agent walks into when its process was stopped while the server closed the socket.
import http from 'node:http';
import { Worker as Thread } from 'node:worker_threads';
import { afterEach, describe, expect, test } from 'vitest';
import { FreshAgent } from '../../worker/index.js';

// The server runs in a thread, so it closes idle connections while the test's thread is blocked.
const SERVER = `
const http = require('node:http');
const { parentPort } = require('node:worker_threads');
let connections = 0;
const server = http.createServer((req, res) => {
  req.resume();
  req.on('end', () => res.end('{}'));
  res.on('finish', () => setTimeout(() => server.closeIdleConnections(), 100));
});
// No keep-alive timeout (and so no Keep-Alive hint to the client): the server closes idle
// connections itself, 100 ms after each answer.
server.keepAliveTimeout = 0;
server.on('connection', () => (connections += 1));
server.listen(0, '127.0.0.1', () => parentPort.postMessage({ port: server.address().port }));
parentPort.on('message', () => parentPort.postMessage({ connections }));
`;

const threads: Thread[] = [];
afterEach(async () => {
  for (const thread of threads.splice(0)) await thread.terminate();
});

async function startServer(): Promise<{ port: number; connections(): Promise<number> }> {
  const thread = new Thread(SERVER, { eval: true });
  threads.push(thread);
  const next = () => new Promise<Record<string, number>>((resolve) => thread.once('message', resolve));
  const { port } = await next();
  return {
    port: port!,
    connections: async () => {
      const answer = next();
      thread.postMessage('count');
      return (await answer).connections!;
    },
  };
}

/** Starts a POST at once (synchronously picks a connection) and resolves with how it went. */
function post(port: number, agent: http.Agent): Promise<{ ok: boolean; reused: boolean; error?: string }> {
  return new Promise((resolve) => {
    const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/', agent }, (res) => {
      res.resume();
      // The agent takes the connection back just after the answer's end.
      res.on('end', () => setImmediate(() => resolve({ ok: res.statusCode === 200, reused: req.reusedSocket })));
    });
    req.on('error', (err: NodeJS.ErrnoException) => resolve({ ok: false, reused: req.reusedSocket, error: err.code }));
    req.end('{}');
  });
}

/** Blocks this thread, as SIGSTOP or a long GC would: no timer, no socket event runs meanwhile. */
function pause(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

describe('FreshAgent', () => {
  test('reuses a connection that has been idle a short while', async () => {
    const server = await startServer();
    const agent = new FreshAgent({ freshMs: 2_000 });
    try {
      expect(await post(server.port, agent)).toMatchObject({ ok: true, reused: false });
      expect(await post(server.port, agent)).toMatchObject({ ok: true, reused: true });
      expect(await server.connections()).toBe(1);
    } finally {
      agent.destroy();
    }
  });

  test('after a pause longer than freshMs it opens a fresh connection instead of one the server closed', async () => {
    const server = await startServer();
    const agent = new FreshAgent({ freshMs: 50 });
    try {
      expect(await post(server.port, agent)).toMatchObject({ ok: true });
      pause(400);
      expect(await post(server.port, agent)).toMatchObject({ ok: true, reused: false });
      expect(await server.connections()).toBe(2);
    } finally {
      agent.destroy();
    }
  });

  // Node 20's agent hands the paused process the connection the server closed; Node 22 and 24,
  // in the same case, open a new one. FreshAgent gives the fresh connection on every version.
  const plainAgentReuses = Number(process.versions.node.split('.')[0]) < 22;
  test(`the hazard it avoids: a plain keep-alive agent, paused the same way, ${plainAgentReuses ? 'reuses the closed connection' : 'opens a new one on this Node.js'}`, async () => {
    const server = await startServer();
    const agent = new http.Agent({ keepAlive: true });
    try {
      expect(await post(server.port, agent)).toMatchObject({ ok: true });
      pause(400);
      expect(await post(server.port, agent)).toMatchObject(
        plainAgentReuses ? { ok: false, reused: true } : { ok: true, reused: false },
      );
    } finally {
      agent.destroy();
    }
  });
});
