// One send followed through the three services' logs by its request id: the gateway takes the
// caller's X-Request-Id (or makes one), answers with it, and passes it on to the queue's lease
// check and the receiver's effect; each service logs it as `reqId`.
import { join } from 'node:path';
import { pino, type Logger } from 'pino';
import request from 'supertest';
import { afterEach, describe, expect, test } from 'vitest';
import { createGatewayApp } from '../../gateway/app.js';
import { CoalescingVerifier } from '../../gateway/verifier.js';
import type { ServiceName } from '../../platform/logger.js';
import { withRequestId } from '../../platform/request-id.js';
import { QueueClient, startQueue, type Lease } from '../../queue/index.js';
import { startReceiver } from '../../receiver/index.js';
import { tempDir } from '../helpers/tmp.js';

type Line = Record<string, unknown>;

const closers: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

/** A logger shaped like the commands' (a `service` field on every line) whose lines land in `lines`. */
function capture(service: ServiceName, lines: Line[]): Logger {
  return pino(
    { level: 'debug', base: { service } },
    { write: (line: string) => void lines.push(JSON.parse(line) as Line) },
  );
}

async function threeServices() {
  const lines: Line[] = [];
  const dir = tempDir('leasehold-reqid-');
  const queue = await startQueue({ db: join(dir, 'queue.sqlite'), logger: capture('queue', lines) });
  closers.push(() => queue.close());
  const receiver = await startReceiver({ db: join(dir, 'receiver.sqlite'), logger: capture('receiver', lines) });
  closers.push(() => receiver.close());
  const gateway = createGatewayApp({
    queueUrl: queue.url,
    receiverUrl: receiver.url,
    logger: capture('gateway', lines),
  });
  closers.push(() => gateway.close());
  const client = new QueueClient(queue.url);
  closers.push(() => client.close());
  await client.enqueue({ id: 'job-1', qty: 2 });
  const lease = (await client.claim('w1'))!;
  return { lines, gateway, lease };
}

const send = (lease: Lease) => ({ jobId: lease.id, owner: lease.owner, token: lease.token, qty: lease.qty });

describe('request ids', () => {
  test("one send through the gateway, the queue and the receiver, followed by the caller's request id", async () => {
    const { lines, gateway, lease } = await threeServices();
    const res = await request(gateway).post('/send').set('X-Request-Id', 'trace-7f3a').send(send(lease));
    expect(res.status).toBe(200);
    expect(res.headers['x-request-id']).toBe('trace-7f3a');

    const traced = lines.filter((line) => line.reqId === 'trace-7f3a');
    const said = (service: string) => traced.filter((line) => line.service === service).map((line) => line.msg);
    expect(said('gateway')).toContain('forwarded');
    expect(said('queue')).toContain('request');
    expect(traced.find((line) => line.service === 'queue')).toMatchObject({ path: '/jobs/job-1/verify' });
    expect(said('receiver')).toEqual(expect.arrayContaining(['effect judged', 'request']));
    expect(traced.find((line) => line.msg === 'effect judged')).toMatchObject({ jobId: 'job-1', token: lease.token });
    // The claim before the send was another request: it has an id of its own.
    const claimed = lines.find((line) => line.msg === 'claimed');
    expect(claimed?.reqId).toEqual(expect.any(String));
    expect(claimed?.reqId).not.toBe('trace-7f3a');
  });

  test('a request without a usable id gets a new one, on the answer and in the log', async () => {
    const { lines, gateway, lease } = await threeServices();
    const plain = await request(gateway).post('/send').send(send(lease));
    const made = plain.headers['x-request-id'] as string;
    expect(made).toMatch(/^[0-9a-f-]{36}$/);
    expect(lines.filter((line) => line.reqId === made).map((line) => line.service)).toEqual(
      expect.arrayContaining(['gateway', 'queue', 'receiver']),
    );
    const odd = await request(gateway).get('/healthz').set('X-Request-Id', 'has spaces in it');
    expect(odd.headers['x-request-id']).not.toBe('has spaces in it');
    expect(odd.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
  });

  test('lease checks that share one queue request carry every send’s id', async () => {
    const calls: Array<{ ids: string[]; requestId: string | undefined }> = [];
    const lease = (id: string): Lease => ({
      id,
      qty: 1,
      payload: null,
      owner: 'w',
      token: 1,
      attempt: 1,
      leaseUntil: 0,
      deadline: null,
    });
    const verifier = new CoalescingVerifier({
      verify: async (id, _input, options) => {
        calls.push({ ids: [id], requestId: options?.requestId });
        await new Promise((resolve) => setTimeout(resolve, 10));
        return lease(id);
      },
      verifyMany: async (leases, options) => {
        calls.push({ ids: leases.map((l) => l.id), requestId: options?.requestId });
        return leases.map((l) => lease(l.id));
      },
    });
    const check = (id: string) => withRequestId(`req-${id}`, () => verifier.verify(id, { owner: 'w', token: 1 }));
    // Made in one turn, the three go together; a fourth while they are on their way goes alone after them.
    const first = Promise.all([check('a'), check('b'), check('c')]);
    await new Promise((resolve) => setImmediate(resolve));
    await Promise.all([first, check('d')]);
    expect(calls).toEqual([
      { ids: ['a', 'b', 'c'], requestId: 'req-a,req-b,req-c' },
      { ids: ['d'], requestId: 'req-d' },
    ]);
  });
});
