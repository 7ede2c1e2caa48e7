// Named downstreams through the kit: stubs it starts beside the receiver and an endpoint of the
// test's own, each reached by a send's `to`; the assertions look at the downstreams they name,
// and at the keys they name, a failure naming downstream, job and key, expected beside actual.
import { expect, onTestFinished, test } from 'vitest';
import { startReceiver } from '../../receiver/index.js';
import { ExpectationError, startSystem, type System, type SystemOptions } from '../../testing/index.js';

async function setup(options: SystemOptions): Promise<System> {
  const system = await startSystem(options);
  onTestFinished(() => system.close());
  return system;
}

test('a stub downstream takes the sends addressed to it; the assertions follow `to`', async () => {
  const system = await setup({ downstreams: { billing: 'stub' }, secret: 'shh' });
  expect(Object.keys(system.downstreams).sort()).toEqual(['billing', 'receiver']);
  const billing = system.downstreams.billing!;
  expect(billing.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/effects$/);

  await system.queue.enqueue({ id: 'invoice-1', qty: 4 });
  const lease = (await system.queue.claim('a'))!;
  const sent = await system.gateway.send({ jobId: 'invoice-1', owner: 'a', token: lease.token, qty: 4, to: 'billing' });
  expect(sent.outcome).toBe('applied');
  await system.queue.finish('invoice-1', { owner: 'a', token: lease.token });

  expect(await billing.stub!.effects()).toMatchObject([{ jobId: 'invoice-1', qty: 4, token: 1 }]);
  expect(await system.stub.effects()).toEqual([]);
  expect(await system.waitForEffect('invoice-1')).toMatchObject({ jobId: 'invoice-1', to: 'billing' });
  await system.expectNoEffect('invoice-1', { to: 'receiver' });
  await expect(system.expectNoEffect('invoice-1')).rejects.toThrow(
    /actual: an effect at "billing" with qty 4, token 1/,
  );
  await system.expectExactlyOnce({ to: 'billing' });
  await expect(system.expectExactlyOnce()).rejects.toThrow(
    'job "invoice-1" (missing_effect): expected 1 effect with qty 4 (the job is done, token 1); actual: no effect',
  );
  await system.reset();
  expect(await billing.stub!.effects()).toEqual([]);
});

test("an endpoint of the test's own is forwarded to, and the kit says it cannot read it", async () => {
  const own = await startReceiver();
  onTestFinished(() => own.close());
  const system = await setup({ downstreams: { shop: { url: `${own.url}/effects` } } });
  expect(system.downstreams.shop).toEqual({ name: 'shop', url: `${own.url}/effects`, stub: undefined });

  await system.queue.enqueue({ id: 'order-1', qty: 2 });
  const lease = (await system.queue.claim('a'))!;
  await system.gateway.send({ jobId: 'order-1', owner: 'a', token: lease.token, qty: 2, to: 'shop' });
  expect(await own.effect('order-1')).toMatchObject({ qty: 2, token: 1 });
  await expect(system.expectExactlyOnce({ to: 'shop' })).rejects.toThrow(
    'downstream "shop" is an endpoint of the test\'s own: the kit can read only the stubs it started ("receiver").',
  );
});

/** The receiver and a mailer stub: the assertions by key. */
const withMailer = () => setup({ downstreams: { mailer: 'stub' } });

const email = (id: string) => ({ to: 'mailer', key: 'email', body: { to: 'a@example.com', subject: id } });

/** Claims the job, sends its default effect and its e-mail (unless told not to), and finishes. */
async function shipped(system: System, id: string, options: { mail?: boolean } = {}) {
  await system.queue.enqueue({ id, qty: 2 });
  const lease = (await system.queue.claim(`w-${id}`))!;
  const under = { jobId: id, owner: lease.owner, token: lease.token };
  await system.gateway.send({ ...under, qty: 2 });
  if (options.mail !== false) await system.gateway.send({ ...under, ...email(id) });
  await system.queue.finish(id, { owner: lease.owner, token: lease.token });
  return lease;
}

/** The ExpectationError `call` rejects with; a call that resolves fails the test. */
const rejection = (call: Promise<unknown>): Promise<ExpectationError> =>
  call.then(
    () => expect.fail('expected the assertion to reject'),
    (err: unknown) => {
      expect(err).toBeInstanceOf(ExpectationError);
      return err as ExpectationError;
    },
  );

test('expectExactlyOnce({to, key}): each done job has the keyed effect once there; a missing one is named', async () => {
  const system = await withMailer();
  await shipped(system, 'order-1');
  await shipped(system, 'order-2');
  await system.expectExactlyOnce();
  await system.expectExactlyOnce({ to: 'mailer', key: 'email' });

  await shipped(system, 'order-3', { mail: false });
  await system.expectExactlyOnce();
  const err = await rejection(system.expectExactlyOnce({ to: 'mailer', key: 'email' }));
  expect(err.message).toBe(
    [
      'expected every done job to take effect exactly once at "mailer" (effect "email"), but the audit found 1 violation about 1 job:',
      '  job "order-3", effect "email" (missing_effect): expected 1 effect "email" (the job is done, token 1); actual: no effect',
      '(audited 3 jobs, 3 done, against 2 effects at "mailer")',
    ].join('\n'),
  );
  expect(err.violations).toMatchObject([
    { rule: 'missing_effect', downstream: 'mailer', jobId: 'order-3', key: 'email' },
  ]);
  // The mailer holds no default effects: asked for them, every job is missing one.
  const defaults = await rejection(system.expectExactlyOnce({ to: 'mailer' }));
  expect(defaults.violations.map((v) => [v.rule, v.jobId, v.key])).toEqual([
    ['missing_effect', 'order-1', undefined],
    ['missing_effect', 'order-2', undefined],
    ['missing_effect', 'order-3', undefined],
  ]);
  // Several keys at once, the default effect among them (null).
  const both = await rejection(system.expectExactlyOnce({ key: [null, 'email'], to: ['receiver', 'mailer'] }));
  expect(both.message.split('\n')[0]).toBe(
    'expected every done job to take effect exactly once at "receiver" (effect, effect "email"), but the audit found 3 violations about 3 jobs:',
  );
});

test('expectNoEffect({key}) looks at that key only; without one, at every effect of the job', async () => {
  const system = await withMailer();
  await system.queue.enqueue({ id: 'order-1', qty: 2 });
  const lease = (await system.queue.claim('a'))!;
  await system.gateway.send({ jobId: 'order-1', owner: 'a', token: lease.token, ...email('order-1') });
  await system.expectNoEffect('order-1', { key: null });
  await system.expectNoEffect('order-1', { key: 'sms' });
  await system.expectNoEffect('order-1', { to: 'receiver' });
  const { appliedAt } = (await system.downstreams.mailer!.stub!.effect('order-1', 'email'))!;
  const expectedLine = `  job "order-1", effect "email": expected no effect; actual: an effect "email" at "mailer" with body {"subject":"order-1","to":"a@example.com"}, token 1, applied at ${appliedAt}`;
  const keyed = await rejection(system.expectNoEffect('order-1', { to: 'mailer', key: 'email' }));
  expect(keyed.message).toBe(
    ['expected no effect "email" for job "order-1" at "mailer", but one was applied:', expectedLine].join('\n'),
  );
  const any = await rejection(system.expectNoEffect('order-1'));
  expect(any.message).toBe(
    ['expected no effect for job "order-1" at "receiver", "mailer", but one was applied:', expectedLine].join('\n'),
  );
});

test('waitForEffect({key}) resolves with the keyed effect and where it is; a timeout says what is there instead', async () => {
  const system = await withMailer();
  await system.queue.enqueue({ id: 'order-1', qty: 2 });
  const lease = (await system.queue.claim('a'))!;
  const waiting = system.waitForEffect('order-1', { key: 'email' });
  setTimeout(
    () => void system.gateway.send({ jobId: 'order-1', owner: 'a', token: lease.token, ...email('order-1') }),
    20,
  );
  expect(await waiting).toMatchObject({ jobId: 'order-1', key: 'email', token: 1, to: 'mailer' });

  const err = await rejection(system.waitForEffect('order-1', { timeoutMs: 30 }));
  expect(err.message).toMatch(
    /^expected an effect for job "order-1" at "receiver", "mailer" within 30 ms; actual: none arrived; there is an effect "email" at "mailer" with body .*, token 1, applied at \d+\.$/,
  );
  const sms = await rejection(system.waitForEffect('order-1', { key: 'sms', to: 'mailer', timeoutMs: 10 }));
  expect(sms.message.split(';')[0]).toBe('expected an effect "sms" for job "order-1" at "mailer" within 10 ms');
});
