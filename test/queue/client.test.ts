// The typed client against a real queue service on 127.0.0.1: answers and errors round-trip.
import { afterEach, expect, test } from 'vitest';
import { join } from 'node:path';
import { QueueClient, QueueError, startQueue, type QueueService } from '../../queue/index.js';
import { tempDir } from '../helpers/tmp.js';

const services: QueueService[] = [];
const clients: QueueClient[] = [];
afterEach(async () => {
  clients.splice(0).forEach((c) => c.close());
  await Promise.all(services.splice(0).map((s) => s.close()));
});

async function setup() {
  const service = await startQueue({ db: join(tempDir('leasehold-client-'), 'q.sqlite'), port: 0 });
  services.push(service);
  const client = new QueueClient(service.url);
  clients.push(client);
  return { service, client };
}

test('a full cycle through the client', async () => {
  const { client } = await setup();
  expect((await client.enqueue({ id: 'a', qty: 2 })).created).toBe(true);
  expect((await client.enqueue({ id: 'a', qty: 2 })).created).toBe(false);
  const lease = await client.claim('w1', 5_000);
  expect(lease).toMatchObject({ id: 'a', owner: 'w1', token: 1 });
  expect(await client.claim('w2')).toBeNull();
  await client.heartbeat('a', { owner: 'w1', token: 1 });
  expect((await client.verify('a', { owner: 'w1', token: 1 })).token).toBe(1);
  expect((await client.finish('a', { owner: 'w1', token: 1, result: 'ok' })).status).toBe('done');
  expect(await client.stats()).toEqual({ pending: 0, leased: 0, done: 1, dead: 0 });
  expect(await client.healthy()).toBe(true);
});

test('refusals come back as the same QueueError with their details', async () => {
  const { client } = await setup();
  await client.enqueue({ id: 'a', qty: 1 });
  await client.claim('w1', 5_000);
  const err = await client.finish('a', { owner: 'w1', token: 7 }).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(QueueError);
  expect(err).toMatchObject({ code: 'stale_lease', status: 409, details: { reason: 'token_mismatch', expected: { token: 7 } } });
  expect(await client.get('nope').catch((e: QueueError) => e.code)).toBe('unknown_job');
});

test('an unreachable queue is queue_unavailable; a body that is not JSON is the caller\'s TypeError', async () => {
  const { service, client } = await setup();
  const bad = client.finish('a', { owner: 'w1', token: 1, result: 10n });
  await expect(bad).rejects.toBeInstanceOf(TypeError);
  const url = service.url;
  await service.close();
  services.splice(0);
  const gone = new QueueClient(url, { timeoutMs: 2_000 });
  clients.push(gone);
  const err = await gone.claim('w1').catch((e: unknown) => e);
  expect(err).toMatchObject({ code: 'queue_unavailable', status: 503 });
  expect(await gone.healthy()).toBe(false);
});
