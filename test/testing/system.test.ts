// startSystem end to end in this process: the three services on 127.0.0.1 on each database, the
// kit's clients and stub helpers, reset, a lease ended on the real clock and on the manual one,
// and workers whose renewals run on the manual clock.
import { join } from 'node:path';
import { describe, expect, onTestFinished, test } from 'vitest';
import { startQueue, type QueueError } from '../../queue/index.js';
import { hold, startSystem, type System, type SystemOptions } from '../../testing/index.js';
import type { WorkerEvent } from '../../worker/index.js';
import { testSchema } from '../helpers/postgres.js';
import { tempDir } from '../helpers/tmp.js';

async function setup(options: SystemOptions = {}): Promise<System> {
  const system = await startSystem(options);
  onTestFinished(() => system.close());
  return system;
}

/** The error a call rejected with, for its code and details. */
async function refusal(call: Promise<unknown>): Promise<QueueError> {
  const err = await call.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err, 'the call was expected to be refused').toBeInstanceOf(Error);
  return err as QueueError;
}

const DATABASES: Array<[string, () => string]> = [
  ['in memory', () => ':memory:'],
  ['on a SQLite file', () => join(tempDir('leasehold-kit-'), 'system.sqlite')],
  ['on PostgreSQL', () => testSchema('lh_kit').url],
];

describe.each(DATABASES)('startSystem %s', (_name, db) => {
  test('starts the three services on 127.0.0.1; a send goes through the gateway to the receiver', async () => {
    const system = await setup({ db: db() });
    for (const url of Object.values(system.urls)) expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    await system.queue.enqueue({ id: 'order-1', qty: 3 });
    const lease = (await system.queue.claim('a'))!;
    const sent = await system.gateway.send({ jobId: 'order-1', owner: 'a', token: lease.token, qty: 3 });
    expect(sent).toMatchObject({ outcome: 'applied', effect: { jobId: 'order-1', qty: 3, token: 1 } });
    await system.queue.finish('order-1', { owner: 'a', token: lease.token });
    expect(await system.stub.effects()).toMatchObject([{ jobId: 'order-1', qty: 3, token: 1 }]);
    expect(await system.receiver.totals()).toEqual({ effects: 1, qty: 3 });
    await system.expectExactlyOnce();
  });

  test('reset erases every job, effect and journal entry: the next case starts from nothing', async () => {
    const system = await setup({ db: db() });
    await system.queue.enqueue({ id: 'order-1', qty: 3 });
    const lease = (await system.queue.claim('a'))!;
    await system.gateway.send({ jobId: 'order-1', owner: 'a', token: lease.token, qty: 3 });
    system.stub.faults.fail({ count: 2 });
    await system.reset();
    expect(await system.queue.list({ limit: 10 })).toEqual([]);
    expect(await system.stub.effects()).toEqual([]);
    expect(await system.stub.journal()).toEqual([]);
    expect(system.stub.faults.pending()).toEqual([]);
    expect((await system.queue.enqueue({ id: 'order-1', qty: 5 })).created).toBe(true);
    expect((await system.queue.claim('b'))!.token).toBe(1);
  });

  test('expireLease ends a lease now on the real clock: the holder is refused, the job claimable', async () => {
    const system = await setup({ db: db() });
    await system.queue.enqueue({ id: 'order-1', qty: 3 });
    await system.queue.enqueue({ id: 'order-2', qty: 1 });
    const held = (await system.queue.claim('a', 60_000))!;
    expect((await system.queue.verify('order-1', { owner: 'a', token: 1 })).token).toBe(1);

    const before = Date.now();
    const expired = await system.expireLease('order-1');
    expect(expired).toMatchObject({ id: 'order-1', status: 'leased', owner: 'a', token: 1 });
    expect(expired.leaseUntil).toBeGreaterThanOrEqual(before - 1_000);
    expect(expired.leaseUntil).toBeLessThan(held.leaseUntil);
    const stale = await refusal(system.queue.verify('order-1', { owner: 'a', token: 1 }));
    expect([stale.code, (stale.details as { reason?: string }).reason]).toEqual(['stale_lease', 'lease_expired']);
    const taken = (await system.queue.claim('b'))!;
    expect([taken.id, taken.owner, taken.token]).toEqual(['order-1', 'b', 2]);
    const fenced = await refusal(system.gateway.send({ jobId: 'order-1', owner: 'a', token: 1, qty: 3 }));
    expect([fenced.code, (fenced.details as { reason?: string }).reason]).toEqual(['stale_lease', 'token_mismatch']);

    const pending = await refusal(system.expireLease('order-2'));
    expect([pending.code, pending.message]).toEqual([
      'invalid_request',
      'Job "order-2" is pending, not leased: there is no lease to run out.',
    ]);
    expect((await refusal(system.expireLease('nope'))).code).toBe('unknown_job');
    expect((await system.queue.get('order-2')).status).toBe('pending');
  });

  test('on the manual clock a lease is valid until just before leaseUntil, and claimable exactly at it', async () => {
    const system = await setup({ db: db(), clock: 'manual' });
    const start = system.clock.now();
    await system.queue.enqueue({ id: 'order-1', qty: 3 });
    const lease = (await system.queue.claim('a', 1_000))!;
    expect(lease.leaseUntil).toBe(start + 1_000);
    system.clock.advance(999);
    expect((await system.queue.verify('order-1', { owner: 'a', token: 1 })).leaseUntil).toBe(start + 1_000);
    expect(await system.queue.claim('b')).toBeNull();
    system.clock.advance(1);
    const at = await refusal(system.queue.verify('order-1', { owner: 'a', token: 1 }));
    expect((at.details as { reason?: string }).reason).toBe('lease_expired');
    const taken = (await system.queue.claim('b', 1_000))!;
    expect([taken.owner, taken.token, taken.leaseUntil]).toEqual(['b', 2, start + 2_000]);
    // The receiver records on the same clock.
    await system.gateway.send({ jobId: 'order-1', owner: 'b', token: 2, qty: 3 });
    expect((await system.stub.effect('order-1'))!.appliedAt).toBe(start + 1_000);
  });
});

test('the API key guards the queue and the gateway; the secret signs what the gateway forwards', async () => {
  const system = await setup({ apiKey: 'k'.repeat(32), secret: 'shh' });
  expect((await fetch(`${system.urls.queue}/stats`)).status).toBe(401);
  expect((await fetch(`${system.urls.gateway}/metrics`)).status).toBe(401);
  expect(await system.queue.stats()).toEqual({ pending: 0, leased: 0, done: 0, dead: 0 });
  await system.queue.enqueue({ id: 'order-1', qty: 2 });
  const unsigned = await fetch(`${system.urls.receiver}/effects`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'Fencing-Token': '1' },
    body: JSON.stringify({ jobId: 'order-1', qty: 2 }),
  });
  expect(unsigned.status).toBe(401);
  await system.queue.claim('a');
  expect((await system.gateway.send({ jobId: 'order-1', owner: 'a', token: 1, qty: 2 })).outcome).toBe('applied');
});

test('the real clock cannot be advanced; a queue outside test mode refuses expireLease and reset', async () => {
  const system = await setup();
  expect(system.clock.manual).toBe(false);
  expect(() => system.clock.advance(1)).toThrow(
    'The system runs on a clock the kit does not move: start it with clock: "manual" to move time, or call system.expireLease(jobId) to end a lease now.',
  );
  const queue = await startQueue({ db: ':memory:' });
  onTestFinished(() => queue.close());
  const message = 'The queue was not started in test mode: start it with testMode: true to end leases or erase jobs.';
  await expect(queue.expireLease('x')).rejects.toThrow(message);
  await expect(queue.reset()).rejects.toThrow(message);
});

test('a system that cannot start rejects with the cause', async () => {
  await expect(startSystem({ db: 'mysql://127.0.0.1/test' })).rejects.toThrow(/Unsupported database URL "mysql:/);
});

test.each([
  [
    { clok: 'manual' },
    'startSystem does not take "clok" (did you mean clock?); its options are db, clock, secret, apiKey, downstreams.',
  ],
  [{ clock: 'weird' }, 'clock must be "real", "manual" or an object with a now() method, not "weird".'],
  [{ clock: {} }, 'clock must be "real", "manual" or an object with a now() method, not {}.'],
  [{ db: 5 }, 'db must be ":memory:", a SQLite file\'s path or a postgres:// URL, not 5.'],
  [{ secret: 5 }, 'secret must be a string, not 5.'],
  [{ apiKey: ['k'] }, 'apiKey must be a string, not ["k"].'],
  [{ downstreams: 5 }, 'downstreams must be an object of downstreams by name, not 5.'],
  [{ downstreams: { billing: 'stubb' } }, 'downstreams.billing must be "stub" or {url, secret?}, not "stubb".'],
  [{ downstreams: { billing: null } }, 'downstreams.billing must be "stub" or {url, secret?}, not null.'],
  [
    { downstreams: { billing: { url: 'http://127.0.0.1:1/e', secret: 7 } } },
    'downstreams.billing.secret must be a string, not 7.',
  ],
])('startSystem(%j) is refused before anything starts, naming the option', async (options, message) => {
  await expect(startSystem(options as SystemOptions)).rejects.toThrow(message);
});

test("close is safe to call twice; a downstream may not take the receiver's name", async () => {
  const system = await startSystem();
  await Promise.all([system.close(), system.close()]);
  await expect(fetch(`${system.urls.queue}/healthz`)).rejects.toThrow();
  await expect(startSystem({ downstreams: { receiver: 'stub' } })).rejects.toThrow(
    'downstreams must not name "receiver": the system starts that one itself.',
  );
});

test('system.worker refuses an option name a worker does not take, naming the call', async () => {
  const system = await startSystem();
  onTestFinished(() => system.close());
  expect(() => system.worker('w', { leaseMS: 1_000 } as never)).toThrow(
    'system.worker does not take "leaseMS" (did you mean leaseMs?)',
  );
  // The first argument names the worker; a second name in its options would be ignored.
  expect(() => system.worker('a', { name: 'b' } as never)).toThrow(
    new RangeError(
      "system.worker takes the worker's name as its first argument, not in its options: leave name out of them.",
    ),
  );
});

test("system.worker leaves out an option set to undefined: the system's own stays, its clock above all", async () => {
  const system = await startSystem({ clock: 'manual' });
  onTestFinished(() => system.close());
  const worker = system.worker('w', { clock: undefined, queueUrl: undefined, apiKey: undefined, graceMs: undefined });
  system.clock.advance(60_000);
  expect(
    { now: worker.options.clock.now(), queueUrl: worker.options.queueUrl.href, graceMs: worker.options.graceMs },
    "the worker's clock, queue and grace",
  ).toEqual({ now: system.clock.now(), queueUrl: `${system.urls.queue}/`, graceMs: 1_000 });
  expect(system.worker('w2', { graceMs: 5_000 }).options.graceMs, 'a grace of its own').toBe(5_000);
});

// A test that fails while its handler waits on something that never comes still closes, well
// inside vitest's default hook timeout of 10 s.
test("close with a kit worker's handler that never ends: released after the kit's grace of 1 s", async () => {
  const system = await startSystem();
  onTestFinished(() => system.close());
  await system.queue.enqueue({ id: 'forever', qty: 1 });
  const worker = system.worker('w');
  let started!: () => void;
  const running = new Promise<void>((resolve) => (started = resolve));
  const outcome = worker.process((await worker.claim())!, () => {
    started();
    return new Promise(() => {});
  });
  await running;
  const closedAt = Date.now();
  await system.close();
  const took = Date.now() - closedAt;
  expect(took, 'close() gave the handler the grace').toBeGreaterThanOrEqual(950);
  expect(took, 'and no more than a few seconds').toBeLessThan(5_000);
  await expect(outcome).resolves.toMatchObject({ status: 'released' });
});

test('after close, the kit refuses its calls, saying the system is closed, instead of the parts failing on their own', async () => {
  const system = await startSystem({ downstreams: { mailer: 'stub' } });
  await system.close();
  const closed = (method: string) => `system.${method}: the system is closed; start another with startSystem().`;
  expect(() => system.worker('late')).toThrow(closed('worker'));
  await expect(system.reset()).rejects.toThrow(closed('reset'));
  await expect(system.expireLease('a')).rejects.toThrow(closed('expireLease'));
  await expect(system.expectExactlyOnce()).rejects.toThrow(closed('expectExactlyOnce'));
  await expect(system.expectNoEffect('a')).rejects.toThrow(closed('expectNoEffect'));
  await expect(system.waitForEffect('a')).rejects.toThrow(closed('waitForEffect'));
  await expect(system.stub.effects()).rejects.toThrow(closed('stub.effects'));
  await expect(system.stub.waitForEffect('a')).rejects.toThrow(closed('stub.waitForEffect'));
  await expect(system.downstreams.mailer!.stub!.totals()).rejects.toThrow(closed('downstreams.mailer.stub.totals'));
});

test("close stops the runs of the system's workers: run() resolves, its job released, nothing left claiming", async () => {
  const system = await startSystem({ clock: 'manual' });
  onTestFinished(() => system.close());
  await system.queue.enqueue({ id: 'held', qty: 1 });
  const events: string[] = [];
  const point = hold();
  const busy = system.worker('busy', { graceMs: 100, onEvent: (e) => events.push(`busy ${e.event}`) });
  const idle = system.worker('idle', { onEvent: (e) => events.push(`idle ${e.event}`) });
  const busyRun = busy.run(async () => point.wait());
  await point.arrived;
  const idleRun = idle.run(async () => {});

  await system.close();
  const within = (run: Promise<unknown>) =>
    Promise.race([run, new Promise((resolve) => setTimeout(() => resolve('still running 2 s after close'), 2_000))]);
  expect(await within(busyRun)).toMatchObject({ claimed: 1, released: 1, finished: 0 });
  expect(await within(idleRun)).toMatchObject({ claimed: 0 });
  const after = events.length;
  await new Promise((resolve) => setTimeout(resolve, 600)); // more than the poll after a failed claim
  expect(events.slice(after), 'events after the runs ended').toEqual([]);
  expect(events.filter((e) => e.endsWith('claim_failed'))).toEqual([]);
  point.release();
});

describe('workers on the manual clock', () => {
  function recorded(system: System, name: string, options = {}) {
    const events: WorkerEvent[] = [];
    // A 30 s lease, renewed every 10 s: each renewal may take up to 10 s of real time to answer.
    const worker = system.worker(name, { onEvent: (e) => events.push(e), ...options });
    const next = (event: string) =>
      new Promise<WorkerEvent>((resolve) => {
        const seen = events.length;
        const look = setInterval(() => {
          const found = events.slice(seen).find((e) => e.event === event);
          if (found) {
            clearInterval(look);
            resolve(found);
          }
        }, 1);
      });
    return { worker, events, next };
  }

  test('renewals keep the lease while the clock moves in steps shorter than their interval', async () => {
    const system = await setup({ clock: 'manual' });
    await system.queue.enqueue({ id: 'order-1', qty: 1 });
    const point = hold();
    const { worker, next } = recorded(system, 'a');
    const run = worker.claim().then((claimed) => worker.process(claimed!, async () => point.wait()));
    await point.arrived;
    for (let step = 0; step < 6; step++) {
      const renewed = next('renewed');
      system.clock.advance(10_000);
      expect(await renewed).toMatchObject({ event: 'renewed', leaseUntil: system.clock.now() + 30_000 });
    }
    point.release();
    expect((await run).status).toBe('finished');
  });

  test('one jump past the lease: the worker takes it as lost at once, with no sleeping', async () => {
    const system = await setup({ clock: 'manual' });
    await system.queue.enqueue({ id: 'order-1', qty: 1 });
    const point = hold();
    const { worker, events } = recorded(system, 'a');
    let signal: AbortSignal | undefined;
    const run = worker.claim().then((claimed) =>
      worker.process(claimed!, async (ctx) => {
        signal = ctx.signal;
        await point.wait();
        return ctx.send();
      }),
    );
    await point.arrived;
    system.clock.advance(30_000);
    expect(events.filter((e) => e.event === 'lost')).toMatchObject([{ reason: 'not_renewed', during: 'renew' }]);
    expect(signal!.aborted).toBe(true);
    point.release();
    const outcome = await run;
    expect(outcome.status).toBe('lost');
    await system.expectNoEffect('order-1');
  });
});
