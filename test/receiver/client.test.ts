// ReceiverClient against a real receiver on 127.0.0.1: each outcome and read round-trips, the
// receiver's refusals come back as the same ReceiverError, and a signed record is accepted.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, test } from 'vitest';
import { ReceiverClient, ReceiverError, startReceiver, type StartReceiverOptions } from '../../receiver/index.js';
import { closeAfterTest } from './setup.js';

async function setup(options: StartReceiverOptions = {}) {
  const receiver = await startReceiver({ db: ':memory:', ...options });
  closeAfterTest(() => receiver.close());
  const client = new ReceiverClient(receiver.url);
  closeAfterTest(async () => client.close());
  return { receiver, client };
}

async function rejection(promise: Promise<unknown>): Promise<ReceiverError> {
  const err = await promise.then(
    (value) => new Error(`expected a ReceiverError, got ${JSON.stringify(value)}`),
    (reason: unknown) => reason,
  );
  expect(err).toBeInstanceOf(ReceiverError);
  return err as ReceiverError;
}

describe('ReceiverClient', () => {
  test('record: applied, then a duplicate of the same effect', async () => {
    const { client, receiver } = await setup();
    const applied = await client.record({ jobId: 'j1', qty: 4 }, { token: 2 });
    expect(applied).toEqual({
      outcome: 'applied',
      effect: { jobId: 'j1', qty: 4, token: 2, appliedAt: expect.any(Number) },
    });
    expect(await client.record({ jobId: 'j1', qty: 4 }, { token: 3 })).toEqual({
      outcome: 'duplicate',
      effect: applied.effect,
    });
    expect(await receiver.effects()).toEqual([applied.effect]);
  });

  test('a lower token is a fenced ReceiverError with the highest token seen', async () => {
    const { client } = await setup();
    await client.record({ jobId: 'j1', qty: 4 }, { token: 5 });
    const err = await rejection(client.record({ jobId: 'j1', qty: 4 }, { token: 3 }));
    expect({ code: err.code, status: err.status, details: err.details }).toEqual({
      code: 'fenced',
      status: 409,
      details: { jobId: 'j1', token: 3, highestToken: 5 },
    });
    expect(err.message).toContain('a newer lease holds this job');
  });

  test('another qty for a recorded job is a conflict ReceiverError carrying the recorded effect', async () => {
    const { client } = await setup();
    const { effect } = await client.record({ jobId: 'j1', qty: 4 }, { token: 1 });
    const err = await rejection(client.record({ jobId: 'j1', qty: 5 }, { token: 1 }));
    expect({ code: err.code, status: err.status, details: err.details }).toEqual({
      code: 'conflict',
      status: 422,
      details: { jobId: 'j1', qty: 5, effect },
    });
  });

  test('reads: effects, effect (undefined when none, ids encoded whole), totals, journal, healthy', async () => {
    const { client } = await setup();
    await client.record({ jobId: 'a', qty: 2 }, { token: 1 });
    await client.record({ jobId: 'b/c d?#', qty: 3 }, { token: 1 });
    await client.record({ jobId: 'a', qty: 2 }, { token: 1 });

    expect((await client.effects()).map((e) => [e.jobId, e.qty])).toEqual([
      ['a', 2],
      ['b/c d?#', 3],
    ]);
    expect(await client.effect('b/c d?#')).toMatchObject({ jobId: 'b/c d?#', qty: 3, token: 1 });
    expect(await client.effect('nope')).toBeUndefined();
    expect(await client.totals()).toEqual({ effects: 2, qty: 5 });
    expect((await client.journal()).map((e) => [e.jobId, e.outcome])).toEqual([
      ['a', 'applied'],
      ['b/c d?#', 'applied'],
      ['a', 'duplicate'],
    ]);
    expect(await client.healthy()).toBe(true);
  });

  test('a base URL with a path keeps it: requests go under the prefix', async () => {
    const { receiver } = await setup();
    const client = new ReceiverClient(`${receiver.url}/prefix/`);
    closeAfterTest(async () => client.close());
    // The receiver has no /prefix routes, so its 404 proves where the request went.
    const err = await rejection(client.totals());
    expect({ code: err.code, status: err.status }).toEqual({ code: 'not_found', status: 404 });
    expect(err.message).toContain('GET /prefix/totals');
  });

  test('against a receiver with a secret: signed with the secret it is applied; unsigned or signed wrongly it is invalid_signature', async () => {
    const { client, receiver } = await setup({ secret: 's3cret' });
    expect(await client.record({ jobId: 'j1', qty: 1 }, { token: 1, secret: 's3cret' })).toMatchObject({
      outcome: 'applied',
    });
    for (const options of [{ token: 2 }, { token: 2, secret: 'other' }, { token: 2, signature: 't=1,v1=00' }]) {
      const err = await rejection(client.record({ jobId: 'j2', qty: 1 }, options));
      expect({ code: err.code, status: err.status }, JSON.stringify(options)).toEqual({
        code: 'invalid_signature',
        status: 401,
      });
    }
    expect((await receiver.effects()).map((e) => e.jobId)).toEqual(['j1']);
    await expect(
      client.record({ jobId: 'j3', qty: 1 }, { token: 1, secret: 's3cret', signature: 't=1,v1=00' }),
    ).rejects.toThrow(RangeError);
  });

  test('an injected fault comes back with the status it was given', async () => {
    const { client, receiver } = await setup();
    receiver.faults.fail({ status: 502 });
    const err = await rejection(client.record({ jobId: 'j1', qty: 1 }, { token: 1 }));
    expect({ code: err.code, status: err.status }).toEqual({ code: 'injected_fault', status: 502 });
  });

  test('nothing listening: receiver_unavailable, and healthy() is false', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const { port } = closed.address() as AddressInfo;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const client = new ReceiverClient(`http://127.0.0.1:${port}`);
    closeAfterTest(async () => client.close());
    const err = await rejection(client.totals());
    expect({ code: err.code, status: err.status }).toEqual({ code: 'receiver_unavailable', status: 503 });
    expect(err.message).toContain('could not be reached');
    expect(await client.healthy()).toBe(false);
  });
});
