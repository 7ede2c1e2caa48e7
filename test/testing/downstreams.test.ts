// Named downstreams through the kit: stubs it starts beside the receiver and an endpoint of the
// test's own, each reached by a send's `to`; the assertions look at the downstreams they name.
import { expect, onTestFinished, test } from 'vitest';
import { startReceiver } from '../../receiver/index.js';
import { startSystem, type System, type SystemOptions } from '../../testing/index.js';

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
