// GatewayClient against a listening gateway (real queue, real receiver): outcomes, errors
// rebuilt with their code, status and details, an unreachable gateway, and an aborted send.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, test } from 'vitest';
import { GatewayClient } from '../../gateway/client.js';
import { GatewayError } from '../../gateway/errors.js';
import { startGateway, type GatewayServiceOptions } from '../../gateway/service.js';
import { closeAfterTest, setup } from './setup.js';

async function clientSetup(gateway: Partial<GatewayServiceOptions> = {}) {
  const s = await setup();
  const service = await startGateway({
    queueUrl: s.queue.url,
    receiverUrl: s.receiver.url,
    backoffBaseMs: 20,
    backoffMaxMs: 100,
    ...gateway,
  });
  closeAfterTest(() => service.close());
  const client = new GatewayClient(service.url);
  closeAfterTest(() => client.close());
  return { ...s, service, client };
}

/** The rejection of `promise`, failing the test when it resolves instead. */
async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    (value) => {
      throw new Error(`expected a rejection, got ${JSON.stringify(value)}`);
    },
    (err: unknown) => err,
  );
}

describe('GatewayClient', () => {
  test('send: applied, then duplicate', async () => {
    const { client, leased } = await clientSetup();
    const lease = await leased('job-1', 4);
    const input = { jobId: 'job-1', owner: 'w1', token: lease.token, qty: 4 };
    expect(await client.send(input)).toMatchObject({
      outcome: 'applied',
      effect: { jobId: 'job-1', qty: 4, token: lease.token },
    });
    expect((await client.send(input)).outcome).toBe('duplicate');
  });

  test('a refusal is a GatewayError with the code, status and details of the answer', async () => {
    const { client, leased } = await clientSetup();
    const lease = await leased('job-1', 4, 'w1');
    const err = await rejection(client.send({ jobId: 'job-1', owner: 'w9', token: lease.token, qty: 4 }));
    expect(err).toBeInstanceOf(GatewayError);
    const { code, status, details } = err as GatewayError;
    expect({ code, status, reason: details.reason }).toEqual({
      code: 'stale_lease',
      status: 409,
      reason: 'owner_mismatch',
    });
    expect(details.current).toMatchObject({ owner: 'w1', token: lease.token });

    const unknown = (await rejection(client.send({ jobId: 'nope', owner: 'w1', token: 1, qty: 1 }))) as GatewayError;
    expect({ code: unknown.code, status: unknown.status }).toEqual({ code: 'unknown_job', status: 404 });
  });

  test("a qty other than the job's is a GatewayError qty_mismatch, 422, and nothing reaches the receiver", async () => {
    const { client, leased, receiver } = await clientSetup();
    const lease = await leased('job-1', 4);
    const err = await rejection(client.send({ jobId: 'job-1', owner: 'w1', token: lease.token, qty: 7 }));
    expect(err).toBeInstanceOf(GatewayError);
    const { code, status, details } = err as GatewayError;
    expect({ code, status, details }).toEqual({
      code: 'qty_mismatch',
      status: 422,
      details: { jobId: 'job-1', qty: 7, jobQty: 4 },
    });
    expect((err as GatewayError).message).toContain("Send the job's qty");
    expect(await receiver.journal()).toEqual([]);
  });

  test('502 and 504 keep their status', async () => {
    const { client, leased, receiver } = await clientSetup({ receiverTimeoutMs: 400, retryAttempts: 2 });
    const lease = await leased('job-1', 4);
    receiver.faults.fail({ status: 500, count: 2 });
    const bad = (await rejection(
      client.send({ jobId: 'job-1', owner: 'w1', token: lease.token, qty: 4 }),
    )) as GatewayError;
    expect({ code: bad.code, status: bad.status, attempts: bad.details.attempts }).toEqual({
      code: 'upstream_unavailable',
      status: 502,
      attempts: 2,
    });
    receiver.faults.delay({ ms: 3_000, count: 2 });
    const slow = (await rejection(
      client.send({ jobId: 'job-1', owner: 'w1', token: lease.token, qty: 4 }),
    )) as GatewayError;
    expect({ code: slow.code, status: slow.status }).toEqual({ code: 'upstream_unavailable', status: 504 });
  });

  test('an unreachable gateway is gateway_unavailable', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const { port } = closed.address() as AddressInfo;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const client = new GatewayClient(`http://127.0.0.1:${port}`);
    closeAfterTest(() => client.close());
    const err = (await rejection(client.send({ jobId: 'j', owner: 'w', token: 1, qty: 1 }))) as GatewayError;
    expect({ code: err.code, status: err.status }).toEqual({ code: 'gateway_unavailable', status: 503 });
    expect(err.message).toContain('could not be reached');
  });

  test('aborting the signal stops the send at once, with the signal’s reason', async () => {
    const { client, leased, receiver } = await clientSetup({ receiverTimeoutMs: 5_000, retryBudgetMs: 20_000 });
    const lease = await leased('job-1', 4);
    receiver.faults.delay({ ms: 10_000 });
    const controller = new AbortController();
    const started = Date.now();
    setTimeout(() => controller.abort(new Error('lease lost')), 300);
    const err = await rejection(
      client.send({ jobId: 'job-1', owner: 'w1', token: lease.token, qty: 4 }, { signal: controller.signal }),
    );
    expect(err).toEqual(new Error('lease lost'));
    expect(Date.now() - started).toBeLessThan(3_000);
  });

  test('an already-aborted signal sends nothing', async () => {
    const { client, leased, receiver } = await clientSetup();
    const lease = await leased('job-1', 4);
    const err = await rejection(
      client.send(
        { jobId: 'job-1', owner: 'w1', token: lease.token, qty: 4 },
        { signal: AbortSignal.abort(new Error('gone')) },
      ),
    );
    expect(err).toEqual(new Error('gone'));
    expect(await receiver.journal()).toEqual([]);
  });
});
