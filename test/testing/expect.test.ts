// The kit's assertions: each passes on a clean run, and on a broken one rejects with an
// ExpectationError whose message names each job with what was expected beside what is.
import { expect, onTestFinished, test } from 'vitest';
import { ExpectationError, startSystem, type System } from '../../testing/index.js';

async function setup(): Promise<System> {
  const system = await startSystem();
  onTestFinished(() => system.close());
  return system;
}

/** A job claimed, sent through the gateway with its own qty, and finished: what a correct worker does. */
async function shipped(system: System, id: string, qty: number): Promise<void> {
  await system.queue.enqueue({ id, qty });
  const lease = (await system.queue.claim(`w-${id}`))!;
  await system.gateway.send({ jobId: id, owner: lease.owner, token: lease.token, qty });
  await system.queue.finish(id, { owner: lease.owner, token: lease.token });
}

async function rejection(call: Promise<unknown>): Promise<ExpectationError> {
  const err = await call.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ExpectationError);
  return err as ExpectationError;
}

test('expectExactlyOnce resolves when every done job took effect once, with its qty', async () => {
  const system = await setup();
  await shipped(system, 'order-1', 3);
  await shipped(system, 'order-2', 1);
  await system.queue.enqueue({ id: 'order-3', qty: 9 });
  await expect(system.expectExactlyOnce()).resolves.toBeUndefined();
});

test('expectExactlyOnce lists each violation, job by job, expected beside actual', async () => {
  const system = await setup();
  await shipped(system, 'fine', 2);
  // Done without its effect.
  await system.queue.enqueue({ id: 'missing', qty: 3 });
  const lease = (await system.queue.claim('a'))!;
  await system.queue.finish('missing', { owner: 'a', token: lease.token });
  // An effect straight at the receiver with another qty, for a job then finished.
  await system.queue.enqueue({ id: 'wrong-qty', qty: 3 });
  const wrong = (await system.queue.claim('b'))!;
  await system.receiver.record({ jobId: 'wrong-qty', qty: 5 }, { token: wrong.token });
  await system.queue.finish('wrong-qty', { owner: 'b', token: wrong.token });
  // An effect for a job the queue never had.
  await system.receiver.record({ jobId: 'stranger', qty: 4 }, { token: 7 });

  const err = await rejection(system.expectExactlyOnce());
  expect(err.message).toBe(
    [
      'expected every done job to take effect exactly once at "receiver", but the audit found 3 violations about 3 jobs:',
      '  job "missing" (missing_effect): expected 1 effect with qty 3 (the job is done, token 1); actual: no effect',
      '  job "wrong-qty" (qty_differs): expected qty 3 (the job\'s); actual: qty 5 (token 1)',
      '  job "stranger" (unknown_job): expected no effect (the queue has no such job); actual: an effect with qty 4, token 7',
      '(audited 3 jobs, 3 done, against 3 effects at "receiver")',
    ].join('\n'),
  );
  expect(err.violations.map((v) => [v.rule, v.jobId])).toEqual([
    ['missing_effect', 'missing'],
    ['qty_differs', 'wrong-qty'],
    ['unknown_job', 'stranger'],
  ]);
});

test('an effect sent without qty is shown as having none, not qty undefined', async () => {
  const system = await setup();
  await system.receiver.record({ jobId: 'ghost', key: 'mail', body: { to: 'a@example.com' } }, { token: 7 });
  const err = await rejection(system.expectExactlyOnce({ key: 'mail' }));
  expect(err.message.split('\n')[1]).toBe(
    '  job "ghost", effect "mail" (unknown_job): expected no effect (the queue has no such job); actual: an effect with no qty, token 7',
  );
});

test('expectExactlyOnce names a token no claim issued', async () => {
  const system = await setup();
  await system.queue.enqueue({ id: 'order-1', qty: 2 });
  await system.queue.claim('a');
  await system.receiver.record({ jobId: 'order-1', qty: 2 }, { token: 5 });
  const err = await rejection(system.expectExactlyOnce());
  expect(err.message.split('\n')[1]).toBe(
    '  job "order-1" (token_ahead): expected a token at most 1 (the job\'s current token); actual: token 5 (qty 2)',
  );
});

test('expectNoEffect resolves while the job has none, and lists the effect once it has one', async () => {
  const system = await setup();
  await system.queue.enqueue({ id: 'order-1', qty: 2 });
  await system.expectNoEffect('order-1');
  const lease = (await system.queue.claim('a'))!;
  await system.gateway.send({ jobId: 'order-1', owner: 'a', token: lease.token, qty: 2 });
  const { appliedAt } = (await system.stub.effect('order-1'))!;
  const err = await rejection(system.expectNoEffect('order-1'));
  expect(err.message).toBe(
    [
      'expected no effect for job "order-1" at "receiver", but one was applied:',
      `  job "order-1": expected no effect; actual: an effect at "receiver" with qty 2, token 1, applied at ${appliedAt}`,
    ].join('\n'),
  );
});

test('waitForEffect resolves once the effect arrives, and rejects naming the job when none does', async () => {
  const system = await setup();
  await system.queue.enqueue({ id: 'order-1', qty: 2 });
  const lease = (await system.queue.claim('a'))!;
  const waiting = system.waitForEffect('order-1');
  setTimeout(() => void system.gateway.send({ jobId: 'order-1', owner: 'a', token: lease.token, qty: 2 }), 20);
  expect(await waiting).toMatchObject({ jobId: 'order-1', qty: 2, token: 1, to: 'receiver' });

  const err = await rejection(system.waitForEffect('order-2', { timeoutMs: 30 }));
  expect(err.message).toBe('expected an effect for job "order-2" at "receiver" within 30 ms; actual: none arrived.');
  await expect(system.waitForEffect('order-1', { to: 'billing' })).rejects.toThrow(
    'there is no downstream "billing"; the system has "receiver".',
  );
});

test('the assertions refuse arguments they would otherwise ignore, naming them, instead of passing', async () => {
  const system = await setup();
  await system.queue.enqueue({ id: 'order-1', qty: 1 });
  const calls: Array<[() => Promise<unknown>, string]> = [
    [() => system.expectExactlyOnce('order-1' as never), 'expectExactlyOnce takes options {to, key}, not "order-1".'],
    [
      () => system.expectExactlyOnce({ jobId: 'order-1' } as never),
      'expectExactlyOnce does not take "jobId"; its options are to, key.',
    ],
    [
      () => system.expectExactlyOnce({ to: 5 } as never),
      "expectExactlyOnce: to must be a downstream's name or a list of them, not 5.",
    ],
    [
      () => system.expectNoEffect(undefined as never),
      "expectNoEffect takes the job's id, a non-empty string, first; not undefined.",
    ],
    [
      () => system.expectNoEffect('order-1', { key: 7 } as never),
      "expectNoEffect: key must be an effect's key, null for the default effect, or a list of them, not 7.",
    ],
    [() => system.waitForEffect('' as never), 'waitForEffect takes the job\'s id, a non-empty string, first; not "".'],
    [
      () => system.waitForEffect('order-1', { timeout: 5 } as never),
      'waitForEffect does not take "timeout" (did you mean timeoutMs?); its options are to, key, timeoutMs.',
    ],
    [() => system.expireLease(5 as never), "expireLease takes the job's id, a non-empty string, first; not 5."],
  ];
  for (const [call, message] of calls) await expect(call()).rejects.toThrow(message);
  // The one job was left as it was.
  expect(await system.queue.get('order-1')).toMatchObject({ status: 'pending', attempts: 0, token: 0 });
});

test('a key no effect can have, or a timeoutMs of the wrong kind, is refused naming the value, not looked for', async () => {
  const system = await setup();
  await shipped(system, 'order-1', 2);
  const long = 'x'.repeat(300);
  const calls: Array<[() => Promise<unknown>, string, string]> = [
    // Keys are 1–128 characters by the id rule: nothing could ever be found under this one, so it would pass.
    [
      () => system.expectNoEffect('order-1', { key: long }),
      'RangeError',
      'expectNoEffect: no effect can have the key "xxxxxxxxxxxxxxxxxxxx"… (300 characters): key must be at most 128 characters.',
    ],
    // The default effect has no key: '' quietly meant it.
    [
      () => system.expectNoEffect('order-1', { key: '' }),
      'RangeError',
      'expectNoEffect: no effect can have the key "": key must not be empty. The default effect has no key: name it with null.',
    ],
    [
      () => system.expectExactlyOnce({ key: ['receipt', ''] }),
      'RangeError',
      'expectExactlyOnce: no effect can have the key "": key must not be empty. The default effect has no key: name it with null.',
    ],
    [
      () => system.waitForEffect('order-1', { key: 'a\u0000b', timeoutMs: 10 }),
      'RangeError',
      'waitForEffect: no effect can have the key "a\\u0000b": key must not contain a NUL character.',
    ],
    [
      () => system.waitForEffect('order-1', { timeoutMs: '50' as never }),
      'TypeError',
      'waitForEffect: timeoutMs must be a whole number of milliseconds, 0 or more, not "50".',
    ],
    [
      () => system.waitForEffect('order-1', { timeoutMs: -1 }),
      'RangeError',
      'waitForEffect: timeoutMs must be a whole number of milliseconds, 0 or more, not -1.',
    ],
  ];
  const refused = [];
  for (const [call] of calls)
    refused.push(
      await call().then(
        () => 'passed',
        (err: unknown) => err,
      ),
    );
  expect(refused.map((err) => (err instanceof Error ? [err.name, err.message] : [err]))).toEqual(
    calls.map(([, name, message]) => [name, message]),
  );
  // The default effect, named by null, is still found.
  await expect(system.waitForEffect('order-1', { key: null, timeoutMs: 0 })).resolves.toMatchObject({ qty: 2 });
});
