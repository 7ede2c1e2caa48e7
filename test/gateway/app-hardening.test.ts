// The gateway against hostile and careless requests and misconfigured peers: ids that collapse
// in a URL, a queue that answers 404 (never "the queue is down"), a 503 that names no internal
// address, a receiver that answers too much, browsers' cross-site requests, and the API key,
// which the gateway requires of its callers and presents to the queue.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { pino } from 'pino';
import request from 'supertest';
import { describe, expect, test } from 'vitest';
import { createGatewayApp, GatewayClient, GatewayError } from '../../gateway/index.js';
import { QueueClient } from '../../queue/client.js';
import { startQueue } from '../../queue/service.js';
import { startReceiver } from '../../receiver/index.js';
import { tempDir } from '../helpers/tmp.js';
import { closeAfterTest, expectError, setup } from './setup.js';

describe('gateway hardening: requests and peers', () => {
  test.each(['.', '..', 'a\ud800', 'a\u0000'])(
    'a send for job id %j is 400 before the queue is asked (it was 503 "queue down")',
    async (jobId) => {
      const { app, receiver } = await setup();
      const res = await request(app).post('/send').send({ jobId, owner: 'w1', token: 1, qty: 1 });
      expectError(res, 400, 'invalid_request');
      expect(await receiver.journal()).toEqual([]);
    },
  );

  test('a queue that answers 404 (the gateway pointed at something else) is 502 upstream_rejected, never queue_unavailable', async () => {
    const { app, receiver, leased } = await setup();
    const lease = await leased('job-1', 5);
    // The receiver answers every queue route with 404 not_found.
    const misrouted = createGatewayApp({ queueUrl: receiver.url, receiverUrl: receiver.url });
    closeAfterTest(() => misrouted.close());
    const res = await request(misrouted)
      .post('/send')
      .send({ jobId: 'job-1', owner: 'w1', token: lease.token, qty: 5 });
    expectError(res, 502, 'upstream_rejected');
    expect(res.body.error.message).toMatch(/refused the gateway's lease check with 404 not_found/);
    expect(res.body.error.message).toMatch(/check that --queue points at a leasehold queue/);
    expect(res.body.error.upstream).toEqual({ service: 'queue', status: 404, code: 'not_found' });
    expect(await receiver.journal()).toEqual([]);
    // The gateway pointed at the right queue forwards the same send.
    expect(
      (await request(app).post('/send').send({ jobId: 'job-1', owner: 'w1', token: lease.token, qty: 5 })).status,
    ).toBe(200);
  });

  test("an unreachable queue's 503 names neither its address nor the socket error; the log does", async () => {
    const lines: string[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(line) });
    const { queue, receiver, leased } = await setup();
    const lease = await leased('job-1', 5);
    const app = createGatewayApp({ queueUrl: queue.url, receiverUrl: receiver.url, logger });
    closeAfterTest(() => app.close());
    await queue.close();
    const res = await request(app).post('/send').send({ jobId: 'job-1', owner: 'w1', token: lease.token, qty: 5 });
    expectError(res, 503, 'queue_unavailable');
    const body = JSON.stringify(res.body);
    const { host } = new URL(queue.url);
    expect(body).not.toContain(host);
    expect(body).not.toContain('127.0.0.1');
    expect(body).not.toMatch(/ECONNREFUSED|connect /);
    expect(lines.join('\n')).toContain(host);
    expect(lines.join('\n')).toContain('ECONNREFUSED');
  });

  test('a receiver that answers more than 1 MiB is a failed attempt, not a buffer that grows', async () => {
    const huge = createServer((req, res) => {
      req.resume();
      res.writeHead(201, { 'content-type': 'application/json' });
      res.end(`{"outcome":"applied","effect":{"pad":"${'x'.repeat(2 * 1024 * 1024)}"}}`);
    });
    await new Promise<void>((resolve) => huge.listen(0, '127.0.0.1', resolve));
    closeAfterTest(() => new Promise<void>((resolve) => huge.close(() => resolve())));
    const { port } = huge.address() as AddressInfo;
    const { app, leased } = await setup({ gateway: { receiverUrl: `http://127.0.0.1:${port}`, retryAttempts: 2 } });
    const lease = await leased('job-1', 5);
    const res = await request(app).post('/send').send({ jobId: 'job-1', owner: 'w1', token: lease.token, qty: 5 });
    expectError(res, 502, 'upstream_unavailable');
    expect(res.body.error.failures.map((f: { code?: string }) => f.code)).toEqual([
      'ERR_ANSWER_TOO_LARGE',
      'ERR_ANSWER_TOO_LARGE',
    ]);
  });

  test('a cross-site "simple" request (text/plain) cannot send: 415', async () => {
    const { app, receiver, leased } = await setup();
    const lease = await leased('job-1', 5);
    const res = await request(app)
      .post('/send')
      .set('content-type', 'text/plain')
      .send(JSON.stringify({ jobId: 'job-1', owner: 'w1', token: lease.token, qty: 5 }));
    expectError(res, 415, 'unsupported_media_type');
    expect(await receiver.journal()).toEqual([]);
  });

  test.each([
    ['DELETE /send without a body', 'delete', '/send', undefined, undefined],
    ['PUT /send with text/plain', 'put', '/send', 'text/plain', 'x'],
    ['POST /healthz with broken JSON', 'post', '/healthz', 'application/json', '{bad'],
    ['POST /nowhere with a form', 'post', '/nowhere', 'application/x-www-form-urlencoded', 'a=1'],
  ] as const)(
    '%s is 404 not_found whatever its body: routing comes before the body',
    async (_n, method, path, type, body) => {
      const { app } = await setup();
      let req = request(app)[method](path);
      if (type !== undefined) req = req.set('content-type', type);
      const res = body === undefined ? await req : await req.send(body);
      expectError(res, 404, 'not_found');
      expect(res.body.error.message).toContain(`There is no ${method.toUpperCase()} ${path} on the gateway`);
    },
  );
});

describe('gateway: the API key', () => {
  const KEY = 'shared-key-0123456789';

  async function services(gatewayKey: string | undefined) {
    const queue = await startQueue({ db: join(tempDir('leasehold-gw-key-'), 'q.sqlite'), apiKey: KEY });
    closeAfterTest(() => queue.close());
    const receiver = await startReceiver();
    closeAfterTest(() => receiver.close());
    const app = createGatewayApp({ queueUrl: queue.url, receiverUrl: receiver.url, apiKey: gatewayKey });
    closeAfterTest(() => app.close());
    const queueClient = new QueueClient(queue.url, { apiKey: KEY });
    closeAfterTest(() => queueClient.close());
    await queueClient.enqueue({ id: 'job-1', qty: 5 });
    const lease = (await queueClient.claim('w1'))!;
    return { app, receiver, lease };
  }

  test('the gateway requires the key of its callers, and presents it to the queue', async () => {
    const { app, receiver, lease } = await services(KEY);
    const send = { jobId: 'job-1', owner: 'w1', token: lease.token, qty: 5 };
    expect((await request(app).get('/healthz')).status).toBe(200);
    // Only GET (and HEAD) /healthz is open: an unkeyed POST there is refused before its body is read.
    expectError(
      await request(app).post('/healthz').set('content-type', 'application/json').send('{bad'),
      401,
      'unauthorized',
    );
    expectError(await request(app).post('/send').send(send), 401, 'unauthorized');
    expectError(await request(app).post('/send').set('authorization', 'Bearer nope').send(send), 401, 'unauthorized');
    expectError(
      await request(app)
        .post('/sends')
        .send({ sends: [send] }),
      401,
      'unauthorized',
    );
    expect(await receiver.journal()).toEqual([]);
    const res = await request(app).post('/send').set('authorization', `Bearer ${KEY}`).send(send);
    expect({ status: res.status, outcome: res.body.outcome }).toEqual({ status: 200, outcome: 'applied' });
  });

  test("a gateway without the queue's key is 502 upstream_rejected saying so, never queue_unavailable", async () => {
    const { app, receiver, lease } = await services(undefined);
    const res = await request(app).post('/send').send({ jobId: 'job-1', owner: 'w1', token: lease.token, qty: 5 });
    expectError(res, 502, 'upstream_rejected');
    expect(res.body.error.message).toMatch(/401 unauthorized.*--api-key must be the queue's/);
    expect(await receiver.journal()).toEqual([]);
  });

  test('GatewayClient presents its apiKey; without it a send is GatewayError unauthorized', async () => {
    const { app, lease } = await services(KEY);
    const server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    closeAfterTest(() => new Promise<void>((resolve) => server.close(() => resolve())));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const send = { jobId: 'job-1', owner: 'w1', token: lease.token, qty: 5 };
    const bare = new GatewayClient(url);
    closeAfterTest(() => bare.close());
    const refused = await bare.send(send).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(GatewayError);
    expect(refused).toMatchObject({ code: 'unauthorized', status: 401 });
    const keyed = new GatewayClient(url, { apiKey: KEY });
    closeAfterTest(() => keyed.close());
    expect((await keyed.send(send)).outcome).toBe('applied');
  });
});
