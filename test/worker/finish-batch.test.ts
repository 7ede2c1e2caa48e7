// Finishes coalesced across a worker's slots, against the real queue behind a proxy that counts,
// holds and cuts requests: slots that finish together share one POST /finishes, each getting its
// own job, its own next lease and its own refusal; a lone finish goes at once by the single
// route; a batch holds no more than the queue's body and key limits; a batch refused whole is sent
// again one finish at a time; a cut answer is retried by each finish on its own path, and
// recognised as landed, even when the queue answers again only after the leases ran out.
import { describe, expect, test } from 'vitest';
import { QueueClient } from '../../queue/client.js';
import { enqueue, finishOutlivedLease, finishRequests, gate, ids, runOn, start } from './finish-kit.js';
import { queueProxy } from './proxy.js';
import { closeAfterTest, eventually, setup, timeline } from './setup.js';

describe('finishes coalesced across slots', () => {
  test('eight slots that finish together share one request, and each gets its own job and its own next lease', async () => {
    const s = await setup();
    const proxy = await queueProxy(s.queue.url);
    const jobs = ids('j', 16);
    await enqueue(s, jobs);
    const first = gate(8);
    void first.full.then(first.open);

    const run = start(
      s,
      proxy,
      async (ctx) => {
        await first.wait();
        return { job: ctx.lease.id };
      },
      { concurrency: 8, maxJobs: 16 },
    );

    await expect(run.running).resolves.toEqual({ claimed: 16, finished: 16, failed: 0, lost: 0, released: 0 });
    // Sixteen finishes in two requests: the first eight with their next jobs, then the last eight
    // (maxJobs reached: no next asked).
    expect(proxy.batches.map((b) => b.finishes.length)).toEqual([8, 8]);
    expect(proxy.batches.map((b) => b.next !== undefined)).toEqual([true, false]);
    expect(finishRequests(proxy)).toEqual(['POST /finishes', 'POST /finishes']);
    expect(proxy.requests.length).toBeLessThan(jobs.length);
    for (const id of jobs) {
      // Each job finished once, under its own first token, with its own handler's result.
      expect(await s.client.get(id)).toMatchObject({ status: 'done', owner: 'w1', token: 1, result: { job: id } });
      expect(timeline(run.events, id)).toEqual(['claimed', 'finished']);
    }
    const byFinish = run.events.filter((e) => e.event === 'claimed' && e.via === 'finish');
    expect(new Set(byFinish.map((e) => ('job' in e ? e.job : ''))).size).toBe(8);
  });

  test('a batch with a stale lease and a cancelled job: those two slots are refused and lose their leases, the others finish and get the next jobs', async () => {
    const s = await setup();
    const proxy = await queueProxy(s.queue.url);
    const jobs = ids('j', 8);
    await enqueue(s, jobs);
    const handlers = gate(8);
    const run = start(
      s,
      proxy,
      async () => {
        await handlers.wait();
        return 'ok';
      },
      { concurrency: 8 },
    );
    await handlers.full;
    // j1's lease ends on the queue's clock and another owner claims it; the others are first
    // renewed for long enough to outlast the clock's jump. j2 is cancelled.
    for (const id of jobs.slice(1)) await s.client.heartbeat(id, { owner: 'w1', token: 1, leaseMs: 600_000 });
    await s.takeOver('j1');
    await s.client.cancel('j2', { reason: 'not wanted' });
    // Three jobs for the six finishes that are accepted to claim.
    await enqueue(s, ids('x', 3));
    handlers.open();

    await eventually('nine jobs done', async () => ((await s.client.stats()).done === 9 ? true : undefined));
    run.stop.abort();

    await expect(run.running).resolves.toEqual({ claimed: 11, finished: 9, failed: 0, lost: 2, released: 0 });
    expect(proxy.batches[0]!.finishes.map((f) => f.id).sort()).toEqual(jobs);
    expect(timeline(run.events, 'j1')).toEqual(['claimed', 'refused:finish', 'lost']);
    expect(run.events.find((e) => e.event === 'lost' && e.job === 'j1')).toMatchObject({
      during: 'finish',
      reason: 'token_mismatch',
      current: { status: 'leased', owner: 'thief', token: 2 },
    });
    expect(timeline(run.events, 'j2')).toEqual(['claimed', 'refused:finish', 'lost']);
    expect(run.events.find((e) => e.event === 'lost' && e.job === 'j2')).toMatchObject({
      during: 'finish',
      reason: 'cancelled',
    });
    for (const id of jobs.slice(2)) {
      expect(timeline(run.events, id)).toEqual(['claimed', 'finished']);
      expect(await s.client.get(id)).toMatchObject({ status: 'done', owner: 'w1', token: 1 });
    }
    // The refused finishes claimed nothing: the three next jobs went to three accepted finishes.
    for (const id of ids('x', 3)) {
      expect(timeline(run.events, id)).toEqual(['claimed', 'finished']);
      expect(run.events.find((e) => e.event === 'claimed' && e.job === id)).toMatchObject({ via: 'finish' });
    }
    expect(await s.client.get('j1')).toMatchObject({ status: 'leased', owner: 'thief', token: 2 });
    expect(await s.client.get('j2')).toMatchObject({ status: 'dead', deadReason: 'cancelled' });
  });

  test('an answer cut after the queue committed the batch: each finish is sent again and taken as finished by this worker', async () => {
    const s = await setup();
    const proxy = await queueProxy(s.queue.url);
    const jobs = ids('j', 8);
    await enqueue(s, jobs);
    const handlers = gate(8);
    void handlers.full.then(handlers.open);
    const cut = proxy.cutAnswer('POST /finishes');

    // Retries every 500 ms (a quarter of the 2 s heartbeat interval).
    const run = start(
      s,
      proxy,
      async () => {
        await handlers.wait();
        return 'ok';
      },
      { concurrency: 8, maxJobs: 8, leaseMs: 6_000 },
    );
    await cut;

    await expect(run.running).resolves.toEqual({ claimed: 8, finished: 8, failed: 0, lost: 0, released: 0 });
    expect(proxy.batches[0]!.finishes.length).toBe(8);
    for (const id of jobs) {
      expect(timeline(run.events, id)).toEqual(['claimed', 'call_failed', 'finished']);
      expect(await s.client.get(id)).toMatchObject({ status: 'done', owner: 'w1', token: 1, result: 'ok' });
    }
    // Sent again, alone or together: never fewer finishes than jobs after the cut.
    const again = proxy.batches.slice(1).reduce((n, b) => n + b.finishes.length, 0);
    expect(again + proxy.requests.filter((r) => r === 'POST /jobs/:id/finish').length).toBe(8);
  });

  test('a batch whose answer was cut, its retries finding the queue unreachable until the leases ran out: each finish counts once the queue answers again', async () => {
    const s = await setup();
    const proxy = await queueProxy(s.queue.url);
    const jobs = ids('j', 4);
    await enqueue(s, jobs);
    const handlers = gate(4);
    void handlers.full.then(handlers.open);
    // The queue commits the batch and its answer is cut; from then on the queue cannot be reached.
    const outage = proxy.cutAnswer('POST /finishes').then(() => proxy.unreachable());
    // On the real clock, so the leases run out while the finishes go unanswered.
    const { worker, events } = s.worker({ queueUrl: proxy.url, leaseMs: 900, concurrency: 4 });

    const running = worker.run(
      async () => {
        await handlers.wait();
        return 'ok';
      },
      { maxJobs: 4 },
    );
    for (const id of jobs) await finishOutlivedLease(events, id);
    (await outage).restore();

    const summary = await running;
    expect(
      summary,
      `the run's summary (timelines: ${jobs.map((id) => timeline(events, id).join(' ')).join('; ')})`,
    ).toEqual({ claimed: 4, finished: 4, failed: 0, lost: 0, released: 0 });
    expect(proxy.batches[0]!.finishes.map((f) => f.id).sort()).toEqual(jobs);
    for (const id of jobs) {
      expect(timeline(events, id).filter((step) => step !== 'call_failed')).toEqual(['claimed', 'finished']);
      expect(await s.client.get(id)).toMatchObject({ status: 'done', owner: 'w1', token: 1, result: 'ok' });
    }
  });

  test.each([
    // 300 KiB each: three fit the queue's 1 MiB body limit together, four do not.
    ['bytes', 'x'.repeat(300 * 1024)],
    // 3000 keys each, small in bytes: three fit the queue's 10 000 keys together, four do not.
    ['keys', Object.fromEntries(Array.from({ length: 3000 }, (_, i) => [`k${i}`, 1]))],
  ])(
    'results with too many %s for one request together go in several batches, each under the limit: none refused, no finish sent twice',
    async (_kind, big) => {
      const s = await setup();
      const proxy = await queueProxy(s.queue.url);
      const jobs = ids('j', 8);
      await enqueue(s, jobs);
      const handlers = gate(8);
      void handlers.full.then(handlers.open);

      const run = start(
        s,
        proxy,
        async () => {
          await handlers.wait();
          return big;
        },
        { concurrency: 8, maxJobs: 8 },
      );

      await expect(run.running).resolves.toEqual({ claimed: 8, finished: 8, failed: 0, lost: 0, released: 0 });
      // No request refused: neither a batch nor a finish alone.
      expect(proxy.answers.filter((a) => !a.startsWith('200 ') && !a.startsWith('204 '))).toEqual([]);
      const sizes = proxy.batches.map((b) => b.finishes.length);
      expect(sizes.length).toBeGreaterThanOrEqual(2);
      for (const size of sizes) expect(size).toBeLessThanOrEqual(3);
      // Each job in exactly one request: in one batch, or alone.
      const batched = proxy.batches.flatMap((b) => b.finishes.map((f) => f.id));
      expect(new Set(batched).size).toBe(batched.length);
      const alone = proxy.requests.filter((r) => r === 'POST /jobs/:id/finish').length;
      expect(batched.length + alone).toBe(8);
      expect(sizes.reduce((n, size) => n + size, 0)).toBeGreaterThan(alone);
      for (const id of jobs) {
        expect(timeline(run.events, id)).toEqual(['claimed', 'finished']);
        expect(await s.client.get(id)).toMatchObject({ status: 'done', owner: 'w1', token: 1, result: big });
      }
    },
  );

  test('a batch the queue refuses whole (400 invalid_request) changed nothing, and is sent again one finish at a time', async () => {
    const s = await setup();
    const jobs = ids('j', 8);
    await enqueue(s, jobs);
    const batches: number[] = [];
    let singles = 0;
    // Every batch reaches the real queue naming its first job twice, which the queue refuses whole.
    const queue = s.queueApi({
      finishMany: (owner, finishes, options) => {
        batches.push(finishes.length);
        return s.client.finishMany(owner, [...finishes, finishes[0]!], options);
      },
      finish: (id, input, options) => {
        singles += 1;
        return s.client.finish(id, input, options);
      },
    });
    const handlers = gate(8);
    void handlers.full.then(handlers.open);

    const { summary, events } = await runOn(s, queue, { concurrency: 8, maxJobs: 8 }, async (ctx) => {
      await handlers.wait();
      return ctx.lease.id;
    });

    // Had the refused batch finished any job, that job's finish alone would have been refused.
    expect(summary).toEqual({ claimed: 8, finished: 8, failed: 0, lost: 0, released: 0 });
    expect(batches).toEqual([8]);
    expect(singles).toBe(8);
    for (const id of jobs) {
      expect(timeline(events, id)).toEqual(['claimed', 'finished']);
      expect(await s.client.get(id)).toMatchObject({ status: 'done', owner: 'w1', token: 1, result: id });
    }
  });
});

describe('a queue without POST /finishes', () => {
  test('answers the first batch 404 not_found: those finishes go alone, and every finish after them too', async () => {
    const s = await setup();
    const jobs = ids('j', 8);
    await enqueue(s, jobs);
    // The real queue under a prefix it does not serve: every batch is 404 not_found.
    const older = new QueueClient(`${s.queue.url}/older`);
    closeAfterTest(() => older.close());
    const batches: number[] = [];
    let singles = 0;
    const queue = s.queueApi({
      finishMany: (owner, finishes, options) => {
        batches.push(finishes.length);
        return older.finishMany(owner, finishes, options);
      },
      finish: (id, input, options) => {
        singles += 1;
        return s.client.finish(id, input, options);
      },
      finishAndClaim: (id, input, next, options) => {
        singles += 1;
        return s.client.finishAndClaim(id, input, next, options);
      },
    });
    const handlers = gate(4);
    void handlers.full.then(handlers.open);

    const { summary, events } = await runOn(s, queue, { concurrency: 4, maxJobs: 8 }, async () => {
      await handlers.wait();
      return 'ok';
    });

    expect(summary).toEqual({ claimed: 8, finished: 8, failed: 0, lost: 0, released: 0 });
    // One batch tried; the four next jobs then finish together again, each alone.
    expect(batches).toEqual([4]);
    expect(singles).toBe(8);
    for (const id of jobs) expect(timeline(events, id)).toEqual(['claimed', 'finished']);
  });
});

describe('a lone finish', () => {
  test('goes at once by the single route, without waiting for the slots still working', async () => {
    const s = await setup();
    const proxy = await queueProxy(s.queue.url);
    await enqueue(s, ['quick', 'slow']);
    const slow = gate();
    let returnedAt = 0;
    const run = start(
      s,
      proxy,
      async (ctx) => {
        if (ctx.lease.id === 'slow') await slow.wait();
        returnedAt = Date.now();
        return ctx.lease.id;
      },
      { concurrency: 2, maxJobs: 2 },
    );

    await eventually('the quick job finished', () => timeline(run.events, 'quick').includes('finished') || undefined);
    // Generous for a loaded machine; a finish held for the other slot would wait for ever here.
    expect(Date.now() - returnedAt).toBeLessThan(2_000);
    expect(timeline(run.events, 'quick')).toEqual(['claimed', 'finished']);
    expect(await s.client.get('quick')).toMatchObject({ status: 'done', result: 'quick' });
    expect(slow.waiting).toBe(1);
    expect(finishRequests(proxy)).toEqual(['POST /jobs/:id/finish']);
    slow.open();

    await expect(run.running).resolves.toMatchObject({ claimed: 2, finished: 2 });
    expect(finishRequests(proxy)).toEqual(['POST /jobs/:id/finish', 'POST /jobs/:id/finish']);
  });

  test('finishes made while it is on its way wait for its answer, then go together in one request', async () => {
    const s = await setup();
    const proxy = await queueProxy(s.queue.url);
    const jobs = ids('j', 4);
    await enqueue(s, jobs);
    const others = gate();
    let firstId: string | undefined;
    let returned = 0;
    const held = proxy.hold('POST /jobs/:id/finish');
    const run = start(
      s,
      proxy,
      async (ctx) => {
        firstId ??= ctx.lease.id;
        if (ctx.lease.id !== firstId) await others.wait();
        returned += 1;
        return ctx.lease.id;
      },
      { concurrency: 4, maxJobs: 4 },
    );
    await held.reached;
    await eventually('the other three handlers waiting', () => (others.waiting === 3 ? true : undefined));
    others.open();
    // The three finish meanwhile; none of them leaves while the first is on its way.
    await eventually('the three handlers returned', () => (returned === 4 ? true : undefined));
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(finishRequests(proxy)).toEqual(['POST /jobs/:id/finish']);
    held.release();

    await expect(run.running).resolves.toEqual({ claimed: 4, finished: 4, failed: 0, lost: 0, released: 0 });
    expect(finishRequests(proxy)).toEqual(['POST /jobs/:id/finish', 'POST /finishes']);
    expect(proxy.batches[0]!.finishes.map((f) => f.id).sort()).toEqual(jobs.filter((id) => id !== firstId).sort());
    for (const id of jobs) expect(timeline(run.events, id)).toEqual(['claimed', 'finished']);
  });
});
