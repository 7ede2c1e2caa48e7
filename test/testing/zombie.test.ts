// The zombie through the kit: a worker held after its last look at its lease, the lease run out
// by the manual clock, a second worker takes the job over, the first wakes and is fenced.
import { expect, test } from 'vitest';
import { hold, startSystem } from '../../testing/index.js';
import type { JobContext, WorkerEvent } from '../../worker/index.js';

async function ship(ctx: JobContext) {
  await ctx.send();
  return { shipped: ctx.lease.qty };
}

test('a worker stalled past its lease is fenced at the gateway: one effect', async () => {
  const system = await startSystem({ clock: 'manual' });
  try {
    await system.queue.enqueue({ id: 'order-1', qty: 2 });
    const stall = hold();
    const events: WorkerEvent[] = [];
    const a = system.worker('a', { hooks: { beforeSend: stall.wait }, onEvent: (e) => events.push(e) });
    const first = a.claim().then((claimed) => a.process(claimed!, ship));
    await stall.arrived;
    system.clock.advance(30_000);
    const b = system.worker('b');
    const second = await b.process((await b.claim())!, ship);
    expect(second.status).toBe('finished');
    stall.release();
    const late = await first;
    expect(late.status).toBe('lost');
    expect(events.filter((e) => e.event === 'refused' && e.op === 'send')).toMatchObject([{ code: 'stale_lease' }]);
    expect(await system.stub.journal()).toMatchObject([{ jobId: 'order-1', token: 2, outcome: 'applied' }]);
    await system.expectExactlyOnce();
  } finally {
    await system.close();
  }
});
