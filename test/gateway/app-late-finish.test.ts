// Lease rule 9 through the services: `latePolicy: 'if-unclaimed'` (the CLI's `--late-finish
// if-unclaimed`) lets the current token send and finish after its lease ended while nobody has
// claimed the job since; the default, `reject`, refuses it from the instant the lease ends. The
// queue's clock is the test's: before, exactly at, and after the end of the lease.
import { describe, expect, test } from 'vitest';
import { GatewayClient, GatewayError, startGateway } from '../../gateway/index.js';
import { QueueClient, QueueError, startQueue, type LateFinishPolicy } from '../../queue/index.js';
import { startReceiver } from '../../receiver/index.js';
import { fakeClock } from '../helpers/clock.js';
import { closeAfterTest } from './setup.js';

async function system(latePolicy?: LateFinishPolicy) {
  const clock = fakeClock(5_000_000);
  const queue = await startQueue({ db: ':memory:', clock, ...(latePolicy ? { latePolicy } : {}) });
  closeAfterTest(() => queue.close());
  const receiver = await startReceiver();
  closeAfterTest(() => receiver.close());
  const gateway = await startGateway({ queueUrl: queue.url, receiverUrl: receiver.url });
  closeAfterTest(() => gateway.close());
  const client = new QueueClient(queue.url);
  const sender = new GatewayClient(gateway.url);
  closeAfterTest(async () => {
    client.close();
    sender.close();
  });
  await client.enqueue({ id: 'late', qty: 2 });
  const lease = (await client.claim('w1', 1_000))!;
  expect(lease.leaseUntil).toBe(clock.now() + 1_000);
  const send = () => sender.send({ jobId: 'late', owner: 'w1', token: lease.token, qty: 2 });
  const finish = () => client.finish('late', { owner: 'w1', token: lease.token });
  return { clock, client, receiver, lease, send, finish };
}

/** What a refused call was refused for: its code and the queue's reason. */
async function refusal(call: Promise<unknown>): Promise<{ code: string; reason: unknown }> {
  const err = await call.then(
    () => new Error('expected a refusal, and the call succeeded'),
    (e: unknown) => e,
  );
  if (!(err instanceof GatewayError || err instanceof QueueError)) throw err;
  return { code: err.code, reason: err.details.reason };
}

describe('lease rule 9 through the queue and the gateway', () => {
  test('reject, the default: a send 1 ms before the end goes through; at the end the send and the finish are refused', async () => {
    const s = await system();
    s.clock.set(s.lease.leaseUntil - 1);
    expect(await s.send(), 'a send 1 ms before the end').toMatchObject({ outcome: 'applied' });
    s.clock.set(s.lease.leaseUntil);
    expect(await refusal(s.send()), 'a send at the end').toEqual({ code: 'stale_lease', reason: 'lease_expired' });
    expect(await refusal(s.finish()), 'the finish at the end').toEqual({
      code: 'stale_lease',
      reason: 'lease_expired',
    });
    expect((await s.client.get('late')).status).toBe('leased');
  });

  test('if-unclaimed: past the end, the current token sends and finishes while nobody claimed the job', async () => {
    const s = await system('if-unclaimed');
    s.clock.set(s.lease.leaseUntil + 60_000);
    expect(await s.send(), 'a send a minute after the end').toMatchObject({ outcome: 'applied' });
    expect(await s.finish()).toMatchObject({ status: 'done', token: s.lease.token });
    expect((await s.receiver.effect('late'))?.token).toBe(s.lease.token);
  });

  test('if-unclaimed: once another worker claimed the job, the old token is refused as any stale one', async () => {
    const s = await system('if-unclaimed');
    s.clock.set(s.lease.leaseUntil);
    const next = (await s.client.claim('w2', 1_000))!;
    expect(next).toMatchObject({ id: 'late', token: s.lease.token + 1 });
    expect(await refusal(s.send()), "the old holder's send").toEqual({
      code: 'stale_lease',
      reason: 'token_mismatch',
    });
    expect(await refusal(s.finish()), "the old holder's finish").toEqual({
      code: 'stale_lease',
      reason: 'token_mismatch',
    });
    expect(await s.receiver.effect('late'), 'nothing recorded').toBeUndefined();
  });
});
