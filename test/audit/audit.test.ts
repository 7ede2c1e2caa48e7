// The audit against a real queue and a real receiver in this process: clean after a run, and
// each violation found with both sides' values; the queue's listing read page by page.
import { join } from 'node:path';
import { afterEach, expect, test } from 'vitest';
import { audit, formatAudit } from '../../audit/index.js';
import { QueueClient, startQueue } from '../../queue/index.js';
import { ReceiverClient, startReceiver } from '../../receiver/index.js';
import { tempDir } from '../helpers/tmp.js';

const closers: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

async function setup() {
  const dir = tempDir('leasehold-audit-');
  const queue = await startQueue({ db: join(dir, 'queue.sqlite') });
  closers.push(() => queue.close());
  const receiver = await startReceiver({ db: join(dir, 'receiver.sqlite') });
  closers.push(() => receiver.close());
  const jobs = new QueueClient(queue.url);
  closers.push(() => jobs.close());
  const effects = new ReceiverClient(receiver.url);
  closers.push(() => effects.close());
  /** Enqueue, claim, send its effect (unless told otherwise), finish. */
  const run = async (id: string, qty: number, send: { qty?: number; skip?: boolean } = {}) => {
    await jobs.enqueue({ id, qty });
    const lease = (await jobs.claim('w1'))!;
    if (!send.skip) await effects.record({ jobId: id, qty: send.qty ?? qty }, { token: lease.token });
    await jobs.finish(id, { owner: 'w1', token: lease.token });
    return lease;
  };
  return { queue, receiver, jobs, effects, run };
}

test('clean after every job took effect once; the listing is read page by page', async () => {
  const { queue, receiver, run, jobs } = await setup();
  for (let i = 1; i <= 5; i++) await run(`job-${i}`, i);
  await jobs.enqueue({ id: 'waiting', qty: 9 });
  expect((await jobs.list({ limit: 2, after: 'job-2' })).map((j) => j.id)).toEqual(['job-3', 'job-4']);

  const report = await audit({ queue: queue.url, receiver: receiver.url, pageSize: 2 });
  expect(report.violations).toEqual([]);
  expect(report.ok).toBe(true);
  expect(report.counts).toEqual({
    jobs: 6,
    done: 5,
    effects: 5,
    effectsOfUnfinishedJobs: 0,
    totals: { effects: 5, qty: 15 },
    downstreams: [{ name: 'receiver', effects: 5, expected: [null], byKey: { '': 5 } }],
  });
});

test('another downstream is audited per key, read by its listing under its effect endpoint', async () => {
  const { queue, receiver, jobs, effects } = await setup();
  const mailer = await startReceiver({ db: ':memory:' });
  closers.push(() => mailer.close());
  const mails = new ReceiverClient(mailer.url);
  closers.push(() => mails.close());
  const done = async (id: string, send: (token: number) => Promise<unknown>) => {
    await jobs.enqueue({ id, qty: 2 });
    const lease = (await jobs.claim('w1'))!;
    await effects.record({ jobId: id, qty: 2 }, { token: lease.token });
    await send(lease.token);
    await jobs.finish(id, { owner: 'w1', token: lease.token });
  };
  const email = (jobId: string) => ({ jobId, key: 'email', body: { to: `${jobId}@example.com` } });
  await done('sent', (token) => mails.record(email('sent'), { token }));
  await done('not-sent', async () => {});
  await done('sms-too', async (token) => {
    await mails.record(email('sms-too'), { token });
    await mails.record({ jobId: 'sms-too', key: 'sms', body: 'hi' }, { token });
  });
  await mails.record(email('ghost'), { token: 1 });

  const report = await audit({
    queue: queue.url,
    receiver: receiver.url,
    downstreams: [{ name: 'mailer', url: `${mailer.url}/effects`, keys: ['email'] }],
  });
  expect(report.violations.map((v) => [v.rule, v.downstream, v.jobId, v.key])).toEqual([
    ['missing_effect', 'mailer', 'not-sent', 'email'],
    ['unknown_job', 'mailer', 'ghost', 'email'],
  ]);
  expect(report.counts.downstreams[1]).toEqual({
    name: 'mailer',
    effects: 4,
    expected: ['email'],
    byKey: { email: 3, sms: 1 },
  });

  await expect(
    audit({ queue: queue.url, receiver: receiver.url, downstreams: [{ name: 'mailer', url: mailer.url }] }),
  ).rejects.toThrow(/the downstream mailer's URL must be its effect endpoint ending in \/effects/);
  await expect(
    audit({
      queue: queue.url,
      receiver: receiver.url,
      downstreams: [{ name: 'receiver', url: `${mailer.url}/effects` }],
    }),
  ).rejects.toThrow(/not "receiver"/);
});

test('each violation is found, with the job and both sides', async () => {
  const { queue, receiver, run, effects, jobs } = await setup();
  await run('fine', 2);
  await run('no-effect', 3, { skip: true });
  await run('other-qty', 3, { qty: 4 });
  await effects.record({ jobId: 'ghost', qty: 1 }, { token: 1 });
  await jobs.enqueue({ id: 'ahead', qty: 1 });
  await effects.record({ jobId: 'ahead', qty: 1 }, { token: 7 });

  const report = await audit({ queue: new QueueClient(queue.url), receiver: receiver.url });
  expect(report.ok).toBe(false);
  expect(report.violations.map((v) => [v.rule, v.jobId])).toEqual([
    ['missing_effect', 'no-effect'],
    ['qty_differs', 'other-qty'],
    ['token_ahead', 'ahead'],
    ['unknown_job', 'ghost'],
  ]);
  expect(report.violations.find((v) => v.rule === 'token_ahead')).toMatchObject({
    queue: { status: 'pending', token: 0 },
    receiver: { qty: 1, token: 7 },
  });
});

test('an effect sent without qty (a keyed effect with only a body) is reported with no qty, never qty 0', async () => {
  const { queue, receiver, run, effects } = await setup();
  await run('fine', 2);
  await effects.record({ jobId: 'ghost', key: 'mail', body: { to: 'a@b' } }, { token: 1 });

  const report = await audit({ queue: queue.url, receiver: receiver.url });
  expect(report.violations).toEqual([
    {
      rule: 'unknown_job',
      downstream: 'receiver',
      jobId: 'ghost',
      key: 'mail',
      queue: { job: null },
      receiver: { token: 1 },
      message: 'the receiver has an effect "mail" for job "ghost" (no qty, token 1), which the queue does not know',
    },
  ]);
  // As `leasehold audit --json` prints it: no qty at all.
  expect(JSON.parse(JSON.stringify(report)).violations[0].receiver).toEqual({ token: 1 });
  expect(formatAudit(report)).toContain(
    '  VIOLATION unknown_job: the receiver has an effect "mail" for job "ghost" (no qty, token 1), which the queue does not know — queue {"job":null}, receiver {"token":1}',
  );
  expect(report.counts.totals).toEqual({ effects: 2, qty: 2 });
});

test('a job enqueued after the listing was read is not taken for an unknown one', async () => {
  const { queue, receiver, run, effects, jobs } = await setup();
  await run('a', 1);
  const listing = new QueueClient(queue.url);
  closers.push(() => listing.close());
  const list = listing.listSummaries.bind(listing);
  // The receiver gets an effect for a job enqueued just after the queue's listing was read.
  listing.listSummaries = async (...args) => {
    const page = await list(...args);
    await jobs.enqueue({ id: 'late', qty: 2 });
    const lease = (await jobs.claim('w2'))!;
    await effects.record({ jobId: 'late', qty: 2 }, { token: lease.token });
    return page;
  };
  const report = await audit({ queue: listing, receiver: receiver.url });
  expect(report.violations).toEqual([]);
  expect(report.counts.effectsOfUnfinishedJobs).toBe(1);
});

test('the audit reads jobs without their payloads and results: jobs of 1 MB payloads cost it no more than empty ones', async () => {
  const { queue, receiver, effects, jobs } = await setup();
  const payload = 'x'.repeat(1_000_000);
  for (let i = 0; i < 6; i++) {
    const id = `heavy-${i}`;
    await jobs.enqueue({ id, qty: 1, payload });
    const lease = (await jobs.claim('w1'))!;
    await effects.record({ jobId: id, qty: 1 }, { token: lease.token });
    await jobs.finish(id, { owner: 'w1', token: lease.token, result: { echo: payload } });
  }
  // A client that takes answers of at most 64 KiB: one job with its payload would not fit.
  const small = new QueueClient(queue.url, { maxAnswerBytes: 64 * 1024 });
  closers.push(() => small.close());
  await expect(small.get('heavy-0')).rejects.toMatchObject({ code: 'queue_unavailable' });
  const report = await audit({ queue: small, receiver: receiver.url, pageSize: 4 });
  expect(report.violations).toEqual([]);
  expect(report.counts).toMatchObject({ jobs: 6, done: 6, effects: 6 });
});
