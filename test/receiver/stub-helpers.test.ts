// The stub handle's helpers for test authors: typed reads, waiting for an effect sent in the
// background (and saying what is there when it does not come), and reset between tests.
import { expect, test } from 'vitest';
import { ReceiverClient, startReceiver, type Effect } from '../../receiver/index.js';
import { closeAfterTest } from './setup.js';

async function stub() {
  const receiver = await startReceiver();
  closeAfterTest(() => receiver.close());
  const client = new ReceiverClient(receiver.url);
  closeAfterTest(async () => client.close());
  return { receiver, client };
}

test('waitForEffect resolves with the effect once it is applied', async () => {
  const { receiver, client } = await stub();
  const waiting = receiver.waitForEffect('job-1', { timeoutMs: 2_000 });
  setTimeout(() => void client.record({ jobId: 'job-1', qty: 4 }, { token: 2 }), 30);
  const effect: Effect = await waiting;
  expect(effect).toEqual({ jobId: 'job-1', qty: 4, token: 2, appliedAt: expect.any(Number) });
  expect(await receiver.waitForEffect('job-1'), 'already there: at once').toEqual(effect);
});

test('waitForEffect rejects after its timeout, naming the effects there are', async () => {
  const { receiver, client } = await stub();
  await client.record({ jobId: 'other', qty: 1 }, { token: 1 });
  const started = Date.now();
  await expect(receiver.waitForEffect('job-9', { timeoutMs: 100 })).rejects.toThrow(
    'No effect for job "job-9" arrived within 100 ms; the receiver has 1 effect (other).',
  );
  expect(Date.now() - started).toBeGreaterThanOrEqual(100);
  await expect(receiver.waitForEffect('job-9', { timeoutMs: -1 })).rejects.toThrow(RangeError);
  // A timeoutMs of another kind is a TypeError that quotes it, as the test kit's waitForEffect says.
  await expect(receiver.waitForEffect('job-9', { timeoutMs: '50' as unknown as number })).rejects.toThrow(
    new TypeError('timeoutMs must be a whole number of milliseconds, 0 or more, not "50".'),
  );
});

test('effect and waitForEffect refuse a job id that is not a string, naming the call', async () => {
  const { receiver } = await stub();
  await expect(receiver.effect(undefined as never)).rejects.toThrow(
    "effect takes the job's id, a non-empty string, first; not undefined.",
  );
  await expect(receiver.waitForEffect(42 as never)).rejects.toThrow(
    "waitForEffect takes the job's id, a non-empty string, first; not 42.",
  );
});

// A read under a key no effect can have would find nothing whatever was sent; '' is not the
// default effect's key, which has none.
test('effect and waitForEffect refuse a key no effect can have, and the empty one', async () => {
  const { receiver, client } = await stub();
  await client.record({ jobId: 'job-1', qty: 4 }, { token: 2 });
  await expect(receiver.effect('job-1', '')).rejects.toThrow(
    new RangeError(
      'effect: no effect can have the key "": key must not be empty. The default effect has no key: leave key out.',
    ),
  );
  await expect(receiver.waitForEffect('job-1', { key: 'x'.repeat(129), timeoutMs: 50 })).rejects.toThrow(RangeError);
  await expect(receiver.effect('job-1', 7 as never)).rejects.toThrow(
    new TypeError("effect: key must be an effect's key, a string, or left out for the default effect; not 7."),
  );
  expect((await receiver.effect('job-1'))?.qty, 'the default effect, key left out').toBe(4);
});

test('after close(), the reads and reset say the receiver is closed, not what the closed store answers', async () => {
  const receiver = await startReceiver();
  await receiver.close();
  for (const [method, call] of [
    ['effects', () => receiver.effects()],
    ['effect', () => receiver.effect('job-1')],
    ['totals', () => receiver.totals()],
    ['journal', () => receiver.journal()],
    ['waitForEffect', () => receiver.waitForEffect('job-1', { timeoutMs: 50 })],
    ['reset', () => receiver.reset()],
  ] as const) {
    await expect(call(), method).rejects.toThrow(
      `receiver.${method}: the receiver is closed; start another with startReceiver().`,
    );
  }
  await expect(receiver.close(), 'close() again').resolves.toBeUndefined();
});

// A misspelt option would otherwise make the test wait on the default, or read every job's effects.
test('waitForEffect, effects and close refuse an option they do not take, naming the one meant', async () => {
  const { receiver } = await stub();
  const started = Date.now();
  await expect(receiver.waitForEffect('zz', { timeout: 200 } as never)).rejects.toThrow(
    new RangeError('waitForEffect does not take "timeout" (did you mean timeoutMs?); its options are timeoutMs, key.'),
  );
  expect(Date.now() - started, 'refused at once, not after the default 5 s').toBeLessThan(1_000);
  await expect(receiver.effects({ job: 'a' } as never)).rejects.toThrow(
    'effects does not take "job" (did you mean jobId?); its options are jobId.',
  );
  await expect(receiver.close({ grace: 10 } as never)).rejects.toThrow(
    'close does not take "grace" (did you mean graceMs?); its options are graceMs.',
  );
  expect(await receiver.totals(), 'still open after the refused close').toEqual({ effects: 0, qty: 0 });
});

test('reset forgets effects, journal and faults between tests', async () => {
  const { receiver, client } = await stub();
  await client.record({ jobId: 'a', qty: 2 }, { token: 1 });
  receiver.faults.fail();
  await receiver.reset();
  expect(await receiver.effects()).toEqual([]);
  expect(await receiver.journal()).toEqual([]);
  expect(receiver.faults.pending()).toEqual([]);
  expect(await receiver.totals()).toEqual({ effects: 0, qty: 0 });
});
