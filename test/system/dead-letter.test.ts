// The dead-letter workflow across real processes: a job dies, is listed with its reason and
// retried; its token keeps counting up, so the worker that held it before it died stays fenced
// at the queue, at the gateway and at the receiver, and the receiver keeps the first effect.
// Run after `npm run build`.
import { afterEach, expect, test } from 'vitest';
import { join } from 'node:path';
import { audit } from '../../audit/index.js';
import { GatewayClient, GatewayError } from '../../gateway/client.js';
import { QueueClient, QueueError } from '../../queue/client.js';
import { ReceiverClient, ReceiverError } from '../../receiver/index.js';
import { startProcess } from '../helpers/processes.js';
import { tempDir } from '../helpers/tmp.js';

const clients: Array<{ close(): void }> = [];
afterEach(() => {
  for (const client of clients.splice(0)) client.close();
});

async function rejection<E extends Error>(promise: Promise<unknown>, type: new (...args: never[]) => E): Promise<E> {
  const outcome = await promise.then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );
  if (!('error' in outcome))
    throw new Error(`expected a ${type.name}, but the call answered ${JSON.stringify(outcome.value)}`);
  expect(outcome.error).toBeInstanceOf(type);
  return outcome.error as E;
}

test('dead, listed, retried: the old holder stays fenced everywhere and the first effect stands', async () => {
  const dir = tempDir('leasehold-dead-letter-');
  const queue = await startProcess('queue', ['--port', '0', '--db', join(dir, 'queue.sqlite')]);
  const receiver = await startProcess('receiver', ['--port', '0', '--db', join(dir, 'receiver.sqlite')]);
  const gateway = await startProcess('gateway', ['--port', '0', '--queue', queue.url, '--receiver', receiver.url]);
  const q = new QueueClient(queue.url);
  const g = new GatewayClient(gateway.url);
  const r = new ReceiverClient(receiver.url);
  clients.push(q, g, r);

  await q.enqueue({ id: 'parcel', qty: 5, maxAttempts: 1 });
  const first = (await q.claim('w1', 60_000))!;
  expect(first.token).toBe(1);
  expect(await g.send({ jobId: 'parcel', owner: 'w1', token: 1, qty: 5 })).toMatchObject({ outcome: 'applied' });
  // w1's last attempt fails after its effect went out: the job dies.
  expect(await q.fail('parcel', { owner: 'w1', token: 1, error: 'crashed after sending' })).toMatchObject({
    status: 'dead',
    deadReason: 'attempts_exhausted',
  });

  const dead = await q.list({ status: 'dead' });
  expect(dead.map((j) => [j.id, j.deadReason, j.lastError])).toEqual([
    ['parcel', 'attempts_exhausted', 'crashed after sending'],
  ]);
  expect(await q.retry('parcel', { maxAttempts: 3 })).toMatchObject({
    status: 'pending',
    attempts: 0,
    deadReason: null,
    token: 1,
  });

  const second = (await q.claim('w2', 60_000))!;
  expect(second.token, 'the token after a retry counts on, never reset').toBe(2);

  // The holder from before the job died is fenced at the gateway (nothing forwarded)...
  const stale = await rejection(g.send({ jobId: 'parcel', owner: 'w1', token: 1, qty: 5 }), GatewayError);
  expect({ code: stale.code, reason: stale.details.reason }).toEqual({ code: 'stale_lease', reason: 'token_mismatch' });
  // ...and at the queue.
  const staleFinish = await rejection(q.finish('parcel', { owner: 'w1', token: 1 }), QueueError);
  expect({ code: staleFinish.code, reason: staleFinish.details.reason }).toEqual({
    code: 'stale_lease',
    reason: 'token_mismatch',
  });

  // The retried job's send is a duplicate: the receiver keeps the job's first effect.
  const again = await g.send({ jobId: 'parcel', owner: 'w2', token: 2, qty: 5 });
  expect(again).toMatchObject({ outcome: 'duplicate', effect: { jobId: 'parcel', qty: 5, token: 1 } });
  expect(await q.finish('parcel', { owner: 'w2', token: 2 })).toMatchObject({ status: 'done', token: 2 });

  // Straight at the receiver, the old token is now below the highest it has seen.
  const fenced = await rejection(r.record({ jobId: 'parcel', qty: 5 }, { token: 1 }), ReceiverError);
  expect({ code: fenced.code, highestToken: fenced.details.highestToken }).toEqual({ code: 'fenced', highestToken: 2 });
  expect(await r.totals()).toEqual({ effects: 1, qty: 5 });

  const report = await audit({ queue: q, receiver: r });
  expect(report.violations, 'audit violations').toEqual([]);
});
