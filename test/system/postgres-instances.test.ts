// Two queue processes and two receiver processes on one PostgreSQL database, with many workers
// claiming from both queues and sending effects to both receivers — some of them stalling past
// their lease. Every job is leased to one worker at a time, and every effect is recorded once.
import { afterEach, expect, onTestFinished, test } from 'vitest';
import { audit, formatAudit } from '../../audit/index.js';
import { QueueClient, QueueError, type Lease } from '../../queue/index.js';
import { testSchema } from '../helpers/postgres.js';
import { startProcess, type Running } from '../helpers/processes.js';

const JOBS = 160;
const STEADY_WORKERS = 8;
const STALLING_WORKERS = 3;
const STALLS_EACH = 3;
const LEASE_MS = 5_000;
const STALL_LEASE_MS = 150;
const STALL_MS = 400;

const processes: Running[] = [];
afterEach(async () => {
  await Promise.all(processes.splice(0).map((p) => p.stop('SIGTERM')));
});

interface Claim {
  jobId: string;
  owner: string;
  token: number;
  /** Server time the lease began (leaseUntil - leaseMs: these jobs have no deadline). */
  start: number;
  /** The last leaseUntil the holder was given, by the claim or a heartbeat. */
  until: number;
}

interface Sent {
  jobId: string;
  token: number;
  status: number;
  outcome: string;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function postEffect(receiverUrl: string, lease: Lease): Promise<Sent> {
  const res = await fetch(`${receiverUrl}/effects`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'fencing-token': String(lease.token) },
    body: JSON.stringify({ jobId: lease.id, qty: lease.qty }),
  });
  const body = (await res.json()) as { outcome?: string; error?: { code?: string } };
  return { jobId: lease.id, token: lease.token, status: res.status, outcome: body.outcome ?? body.error?.code ?? '?' };
}

async function getJson<T>(url: string): Promise<T> {
  const res = await fetch(url);
  return (await res.json()) as T;
}

test('two queues and two receivers on one PostgreSQL database: one lease at a time, one effect per job', async () => {
  const { url: db } = testSchema('lh_sys');
  const args = ['--port', '0', '--db', db, '--log-level', 'warn'];
  const started = await Promise.all([
    startProcess('queue', args),
    startProcess('queue', args),
    startProcess('receiver', args),
    startProcess('receiver', args),
  ]);
  processes.push(...started);
  const queues = started.slice(0, 2).map((p) => new QueueClient(p.url));
  const receivers = started.slice(2).map((p) => p.url);
  onTestFinished(() => queues.forEach((q) => q.close()));

  const qtyOf = new Map<string, number>();
  for (let i = 0; i < JOBS; i++) {
    const id = `job-${i}`;
    qtyOf.set(id, 1 + (i % 7));
    await queues[i % 2]!.enqueue({ id, qty: qtyOf.get(id)! });
  }

  const claims: Claim[] = [];
  const sent: Sent[] = [];
  const refusedFinishes: string[] = [];
  let stallsDone = 0;
  const errors: string[] = [];
  let turn = 0;
  const nextQueue = () => queues[turn++ % 2]!;
  const nextReceiver = () => receivers[turn++ % 2]!;
  const claim = async (owner: string, leaseMs: number): Promise<{ lease: Lease; record: Claim } | null> => {
    const lease = await nextQueue().claim(owner, leaseMs);
    if (!lease) return null;
    const record = {
      jobId: lease.id,
      owner,
      token: lease.token,
      start: lease.leaseUntil - leaseMs,
      until: lease.leaseUntil,
    };
    claims.push(record);
    return { lease, record };
  };
  const allDone = async () => (await nextQueue().stats()).done === JOBS;

  // Claims, renews on the other queue, sends with its token, and finishes on either queue.
  const steady = async (owner: string) => {
    while (!(await allDone())) {
      const got = await claim(owner, LEASE_MS);
      if (!got) {
        await sleep(10);
        continue;
      }
      const { lease, record } = got;
      const renewed = await nextQueue().heartbeat(lease.id, { owner, token: lease.token });
      record.until = renewed.leaseUntil;
      const result = await postEffect(nextReceiver(), lease);
      sent.push(result);
      if (result.status !== 200 && result.status !== 201) {
        errors.push(
          `${owner} holding ${lease.id} token ${lease.token} got ${result.status} ${result.outcome} from the receiver`,
        );
        continue;
      }
      await nextQueue().finish(lease.id, { owner, token: lease.token });
    }
  };

  // Claims with a short lease and stalls past it; sends either before the stall (the next holder's
  // send is then a duplicate) or after it (then it is fenced), and tries to finish anyway.
  const stalling = async (owner: string, sendFirst: boolean) => {
    for (let stalls = 0; stalls < STALLS_EACH;) {
      const got = await claim(owner, STALL_LEASE_MS);
      if (!got) {
        if (await allDone()) return;
        await sleep(10);
        continue;
      }
      stalls++;
      stallsDone++;
      if (sendFirst) sent.push(await postEffect(nextReceiver(), got.lease));
      await sleep(STALL_MS);
      if (!sendFirst) sent.push(await postEffect(nextReceiver(), got.lease));
      try {
        await nextQueue().finish(got.lease.id, { owner, token: got.lease.token });
        errors.push(
          `${owner} finished ${got.lease.id} with token ${got.lease.token} ${STALL_MS} ms into a ${STALL_LEASE_MS} ms lease`,
        );
      } catch (err) {
        if (!(err instanceof QueueError) || err.code !== 'stale_lease') throw err;
        refusedFinishes.push(got.lease.id);
      }
    }
  };

  const guard = (work: Promise<void>, who: string) =>
    work.catch((err: unknown) => void errors.push(`${who}: ${String(err)}`));
  const startedAt = performance.now();
  await Promise.all([
    ...Array.from({ length: STALLING_WORKERS }, (_, k) => guard(stalling(`staller-${k}`, k % 2 === 0), `staller-${k}`)),
    ...Array.from({ length: STEADY_WORKERS }, (_, k) => guard(steady(`steady-${k}`), `steady-${k}`)),
  ]);
  const elapsedMs = performance.now() - startedAt;

  expect(errors, 'unexpected outcomes').toEqual([]);
  // Each staller's first claim comes before any job is done; later ones may find none left.
  expect(stallsDone).toBeGreaterThanOrEqual(STALLING_WORKERS);
  expect(refusedFinishes.length, 'finishes refused to stalled workers').toBe(stallsDone);

  // One lease at a time: per job, tokens 1, 2, ... with each lease starting no earlier than the
  // previous one ended (both in the database server's time).
  const byJob = new Map<string, Claim[]>();
  for (const c of claims) byJob.set(c.jobId, [...(byJob.get(c.jobId) ?? []), c]);
  const leaseProblems: string[] = [];
  for (const [jobId, list] of byJob) {
    list.sort((a, b) => a.token - b.token);
    const tokens = list.map((c) => c.token);
    const expected = list.map((_, i) => i + 1);
    if (tokens.join() !== expected.join())
      leaseProblems.push(`${jobId}: tokens ${tokens.join()} (expected ${expected.join()})`);
    for (let i = 1; i < list.length; i++) {
      const [before, after] = [list[i - 1]!, list[i]!];
      if (after.start < before.until) {
        leaseProblems.push(
          `${jobId}: token ${after.token} (${after.owner}) began at ${after.start}, before token ${before.token} (${before.owner}) ended at ${before.until}`,
        );
      }
    }
  }
  expect(leaseProblems, 'jobs leased to two workers at once').toEqual([]);
  expect(byJob.size).toBe(JOBS);
  expect(claims.length, 'claims: one per job plus one more per stall').toBe(JOBS + stallsDone);

  // One effect per job, whichever receiver was asked and whichever token came first.
  const appliedPerJob = [...qtyOf.keys()]
    .map((jobId) => ({ jobId, applied: sent.filter((s) => s.jobId === jobId && s.outcome === 'applied').length }))
    .filter((j) => j.applied !== 1);
  expect(appliedPerJob, 'jobs whose effect was not applied exactly once').toEqual([]);
  const outcomes = new Set(sent.map((s) => s.outcome));
  expect([...outcomes].sort(), 'outcomes the receivers gave').toEqual(['applied', 'duplicate', 'fenced']);
  const totalQty = [...qtyOf.values()].reduce((a, b) => a + b, 0);
  for (const receiver of receivers) {
    expect(await getJson(`${receiver}/totals`), `totals at ${receiver}`).toEqual({ effects: JOBS, qty: totalQty });
  }
  const { effects } = await getJson<{ effects: Array<{ jobId: string; qty: number }> }>(`${receivers[0]}/effects`);
  expect(effects.filter((e) => qtyOf.get(e.jobId) !== e.qty)).toEqual([]);
  for (const queue of queues) expect(await queue.stats()).toEqual({ pending: 0, leased: 0, done: JOBS, dead: 0 });
  // No worker waited on another's lock for long: minutes would mean serialised claims; a loaded machine takes tens of seconds.
  expect(elapsedMs, 'time the workers took').toBeLessThan(45_000);
  // The end-to-end audit agrees, whichever queue and receiver it asks: both share one database.
  const report = await audit({ queue: started[1]!.url, receiver: receivers[0]! });
  expect(report.violations, formatAudit(report).join('\n')).toEqual([]);
  expect(report.counts).toMatchObject({ jobs: JOBS, done: JOBS, effects: JOBS });
});
