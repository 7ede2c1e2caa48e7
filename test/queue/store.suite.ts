// The queue store conformance suite: every lease rule of the contract, against any store.
// Each dialect's test file calls `queueStoreSuite` with a factory; there is no second copy.
import { describe, expect, test } from 'vitest';
import type { Job, LateFinishPolicy, Lease, NewJob, QueueStore } from '../../queue/index.js';
import { QueueError } from '../../queue/index.js';
import { cancelled, released, retried } from './transitions.js';
import { canonicalRequest } from '../../queue/schemas.js';
import { fakeClock, type FakeClock } from '../helpers/clock.js';

export interface StoreHarness {
  store: QueueStore;
  clock: FakeClock;
  /** Another handle on the same database, as a second process would open it. */
  openAnother(): Promise<QueueStore>;
}

export type StoreFactory = (options: { clock: FakeClock; latePolicy: LateFinishPolicy }) => Promise<StoreHarness>;

let counter = 0;

/** A valid enqueue request with overrides, built the way the HTTP app builds one. */
export function newJobInput(overrides: Partial<Omit<NewJob, 'request'>> = {}): NewJob {
  const fields = {
    id: `job-${++counter}`,
    qty: 1,
    payload: null,
    maxAttempts: 5,
    priority: 0,
    runAt: undefined,
    deadline: undefined,
    deadlineMs: undefined,
    ...overrides,
  };
  return { ...fields, request: canonicalRequest(fields) };
}

/** Asserts that `promise` rejects with a QueueError of `code`, and returns it for more checks. */
export async function rejection(promise: Promise<unknown>, code: string): Promise<QueueError> {
  const outcome = await promise.then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );
  if (!('error' in outcome)) {
    throw new Error(`expected a rejection with code "${code}", but it resolved with ${JSON.stringify(outcome.value)}`);
  }
  expect(outcome.error, `expected a QueueError with code "${code}"`).toBeInstanceOf(QueueError);
  expect((outcome.error as QueueError).code).toBe(code);
  return outcome.error as QueueError;
}

/** A fresh store on a fake clock from `factory`, with the small steps every store test takes. */
export async function storeSetup(factory: StoreFactory, latePolicy: LateFinishPolicy = 'reject') {
  const clock = fakeClock(1_000_000);
  const harness = await factory({ clock, latePolicy });
  const { store } = harness;
  const enqueue = async (overrides: Partial<Omit<NewJob, 'request'>> = {}) =>
    (await store.enqueue(newJobInput(overrides))).job;
  const claim = async (owner = 'w1', leaseMs = 1_000): Promise<Lease> => {
    const lease = await store.claim(owner, leaseMs);
    if (!lease) throw new Error(`expected ${owner} to claim a job at ${clock.now()}, but nothing was claimable`);
    return lease;
  };
  const job = async (id: string): Promise<Job> => {
    const found = await store.get(id);
    if (!found) throw new Error(`job ${id} is missing`);
    return found;
  };
  return { ...harness, store, clock, enqueue, claim, job };
}

export function queueStoreSuite(name: string, factory: StoreFactory): void {
  describe(`queue store: ${name}`, () => {
    const setup = (latePolicy: LateFinishPolicy = 'reject') => storeSetup(factory, latePolicy);

    describe('enqueue', () => {
      test('creates a pending job with defaults and token 0', async () => {
        const { enqueue, clock } = await setup();
        const job = await enqueue({ qty: 7, payload: { a: [1, 2] } });
        expect(job).toMatchObject({
          status: 'pending',
          qty: 7,
          payload: { a: [1, 2] },
          token: 0,
          attempts: 0,
          maxAttempts: 5,
          owner: null,
          leaseUntil: null,
          deadline: null,
          runAt: clock.now(),
          createdAt: clock.now(),
        });
      });

      test('the same request again returns the existing job; a different one is job_exists', async () => {
        const { store } = await setup();
        const input = newJobInput({ id: 'same', qty: 3 });
        expect((await store.enqueue(input)).created).toBe(true);
        const again = await store.enqueue({ ...input });
        expect(again.created).toBe(false);
        expect(again.job.qty).toBe(3);
        const other = newJobInput({ id: 'same', qty: 4 });
        const err = await rejection(store.enqueue(other), 'job_exists');
        expect(err.status).toBe(409);
        expect((await store.get('same'))?.qty).toBe(3);
      });

      test('deadlineMs is relative to the queue clock; both deadline forms, or a passed deadline, are refused', async () => {
        const { store, enqueue, clock } = await setup();
        const job = await enqueue({ deadlineMs: 500 });
        expect(job.deadline).toBe(clock.now() + 500);
        await rejection(store.enqueue(newJobInput({ deadline: clock.now() + 10, deadlineMs: 10 })), 'invalid_request');
        await rejection(store.enqueue(newJobInput({ id: 'late', deadline: clock.now() })), 'invalid_request');
        expect(await store.get('late')).toBeNull();
      });
    });

    describe('claim (rule 1)', () => {
      test('sets owner, adds one to token and attempts, leaseUntil = now + leaseMs', async () => {
        const { enqueue, claim, clock, job } = await setup();
        const { id } = await enqueue({ qty: 5 });
        const lease = await claim('alice', 2_000);
        expect(lease).toEqual({
          id,
          qty: 5,
          payload: null,
          owner: 'alice',
          token: 1,
          attempt: 1,
          leaseUntil: clock.now() + 2_000,
          deadline: null,
        });
        expect(await job(id)).toMatchObject({ status: 'leased', owner: 'alice', token: 1, attempts: 1 });
      });

      test('returns null when nothing is claimable', async () => {
        const { store } = await setup();
        expect(await store.claim('w1', 1_000)).toBeNull();
      });

      test('a job is claimable from exactly its runAt', async () => {
        const { store, enqueue, clock } = await setup();
        await enqueue({ runAt: clock.now() + 100 });
        clock.advance(99);
        expect(await store.claim('w1', 1_000)).toBeNull();
        clock.advance(1);
        expect(await store.claim('w1', 1_000)).not.toBeNull();
      });

      test('higher priority first, then runAt, then order of enqueue', async () => {
        const { enqueue, claim, clock } = await setup();
        const t = clock.now();
        await enqueue({ id: 'low-first' });
        await enqueue({ id: 'late-runAt', runAt: t - 1 });
        await enqueue({ id: 'early-runAt', runAt: t - 5 });
        await enqueue({ id: 'high', priority: 10 });
        await enqueue({ id: 'low-second' });
        const order = [];
        for (let i = 0; i < 5; i++) order.push((await claim(`w${i}`)).id);
        expect(order).toEqual(['high', 'early-runAt', 'late-runAt', 'low-first', 'low-second']);
      });
    });

    describe('validity boundary (rule 2)', () => {
      test('finish is valid at leaseUntil - 1', async () => {
        const { store, enqueue, claim, clock } = await setup();
        await enqueue();
        const lease = await claim('w1', 1_000);
        clock.set(lease.leaseUntil - 1);
        const done = await store.finish(lease.id, lease, { ok: true });
        expect(done).toMatchObject({ status: 'done', result: { ok: true } });
      });

      test('finish is rejected at exactly leaseUntil and after, and changes nothing', async () => {
        const { store, enqueue, claim, clock, job } = await setup();
        await enqueue();
        const lease = await claim('w1', 1_000);
        clock.set(lease.leaseUntil);
        const before = await job(lease.id);
        const err = await rejection(store.finish(lease.id, lease, null), 'stale_lease');
        expect(err.details).toMatchObject({ reason: 'lease_expired' });
        clock.set(lease.leaseUntil + 1);
        await rejection(store.finish(lease.id, lease, null), 'stale_lease');
        expect(await job(lease.id)).toEqual(before);
      });

      test('a new claim succeeds at exactly leaseUntil: no gap, no overlap', async () => {
        const { store, enqueue, claim, clock } = await setup();
        await enqueue();
        const first = await claim('w1', 1_000);
        clock.set(first.leaseUntil - 1);
        expect(await store.claim('w2', 1_000)).toBeNull();
        clock.set(first.leaseUntil);
        const second = await claim('w2', 1_000);
        expect(second).toMatchObject({ id: first.id, owner: 'w2', token: 2, attempt: 2 });
        await rejection(store.finish(first.id, first, null), 'stale_lease');
      });
    });

    describe('fencing checks (rule 3)', () => {
      test('each stale reason is reported in the contract order, with expected and current', async () => {
        const { store, enqueue, claim, clock } = await setup();
        const pending = await enqueue({ id: 'pending' });
        let err = await rejection(store.finish(pending.id, { owner: 'w1', token: 1 }, null), 'stale_lease');
        expect(err.details).toEqual({
          reason: 'not_leased',
          expected: { owner: 'w1', token: 1 },
          current: { status: 'pending', owner: null, token: 0, leaseUntil: null },
        });
        const lease = await claim('w1', 1_000);
        err = await rejection(store.heartbeat(lease.id, { owner: 'w1', token: 2 }, undefined), 'stale_lease');
        expect(err.details).toMatchObject({ reason: 'token_mismatch' });
        err = await rejection(store.verify(lease.id, { owner: 'w2', token: 1 }), 'stale_lease');
        expect(err.details).toMatchObject({ reason: 'owner_mismatch', current: { owner: 'w1', token: 1 } });
        clock.set(lease.leaseUntil);
        err = await rejection(store.fail(lease.id, lease, 'boom', undefined), 'stale_lease');
        expect(err.details).toMatchObject({ reason: 'lease_expired' });
      });

      test('the same owner name re-claiming after expiry does not revive its old token', async () => {
        const { store, enqueue, claim, clock } = await setup();
        await enqueue();
        const old = await claim('worker-a', 1_000);
        clock.set(old.leaseUntil);
        const fresh = await claim('worker-a', 1_000);
        expect(fresh.token).toBe(old.token + 1);
        const err = await rejection(store.finish(old.id, old, null), 'stale_lease');
        expect(err.details).toMatchObject({
          reason: 'token_mismatch',
          expected: { owner: 'worker-a', token: old.token },
          current: { status: 'leased', owner: 'worker-a', token: fresh.token, leaseUntil: fresh.leaseUntil },
        });
        expect(err.message).toContain(`token ${old.token}`);
        expect(err.message).toContain(`token ${fresh.token}`);
        expect(err.message).toContain('"worker-a"');
        expect((await store.finish(fresh.id, fresh, null)).status).toBe('done');
      });

      test('unknown jobs are unknown_job on every fenced operation', async () => {
        const { store } = await setup();
        const who = { owner: 'w1', token: 1 };
        await rejection(store.finish('nope', who, null), 'unknown_job');
        await rejection(store.heartbeat('nope', who, undefined), 'unknown_job');
        await rejection(store.fail('nope', who, 'x', undefined), 'unknown_job');
        await rejection(store.verify('nope', who), 'unknown_job');
      });

      test('finish of a done job is not_leased', async () => {
        const { store, enqueue, claim } = await setup();
        await enqueue();
        const lease = await claim();
        await store.finish(lease.id, lease, null);
        const err = await rejection(store.finish(lease.id, lease, null), 'stale_lease');
        expect(err.details).toMatchObject({ reason: 'not_leased', current: { status: 'done' } });
      });
    });

    describe('heartbeat, verify, fail', () => {
      test('heartbeat renews for the length the claim asked for, or a new leaseMs', async () => {
        const { store, enqueue, claim, clock } = await setup();
        await enqueue();
        const lease = await claim('w1', 1_000);
        clock.advance(600);
        const renewed = await store.heartbeat(lease.id, lease, undefined);
        expect(renewed.leaseUntil).toBe(clock.now() + 1_000);
        clock.advance(600);
        const longer = await store.heartbeat(lease.id, lease, 5_000);
        expect(longer.leaseUntil).toBe(clock.now() + 5_000);
        clock.advance(4_999);
        expect((await store.verify(lease.id, lease)).token).toBe(1);
      });

      test('verify is read-only', async () => {
        const { store, enqueue, claim, clock, job } = await setup();
        await enqueue();
        const lease = await claim();
        const before = await job(lease.id);
        clock.advance(10);
        expect(await store.verify(lease.id, lease)).toEqual(lease);
        expect(await job(lease.id)).toEqual(before);
      });

      test('fail returns the job to pending at now + retryInMs, keeps the error, and the next claim gets a new token', async () => {
        const { store, enqueue, claim, clock } = await setup();
        await enqueue();
        const lease = await claim();
        const failed = await store.fail(lease.id, lease, 'downstream said no', 250);
        expect(failed).toMatchObject({ status: 'pending', runAt: clock.now() + 250, lastError: 'downstream said no' });
        clock.advance(249);
        expect(await store.claim('w2', 1_000)).toBeNull();
        clock.advance(1);
        expect(await claim('w2')).toMatchObject({ token: 2, attempt: 2 });
      });

      test('fail without retryInMs backs off more with each attempt', async () => {
        const { store, enqueue, claim, clock } = await setup();
        await enqueue();
        const delays: number[] = [];
        for (let i = 0; i < 3; i++) {
          const lease = await claim();
          const failed = await store.fail(lease.id, lease, 'again', undefined);
          delays.push(failed.runAt - clock.now());
          clock.set(failed.runAt);
        }
        expect(delays[0]).toBeGreaterThan(0);
        expect(delays[1]).toBeGreaterThan(delays[0]!);
        expect(delays[2]).toBeGreaterThan(delays[1]!);
      });
    });

    describe('deadline (rule 4)', () => {
      test('deadline 100, now 0, leaseMs 1000 gives leaseUntil 100', async () => {
        const { store, enqueue, clock } = await setup();
        clock.set(0);
        await enqueue({ deadline: 100 });
        const lease = await store.claim('w1', 1_000);
        expect(lease?.leaseUntil).toBe(100);
        clock.set(50);
        expect((await store.heartbeat(lease!.id, lease!, 1_000)).leaseUntil).toBe(100);
      });

      test('at the deadline the lease is refused as deadline_passed and the job is never claimed again', async () => {
        const { store, enqueue, clock, job } = await setup();
        clock.set(0);
        const { id } = await enqueue({ deadline: 100 });
        const lease = (await store.claim('w1', 1_000))!;
        clock.set(99);
        expect((await store.verify(id, lease)).token).toBe(1);
        clock.set(100);
        const err = await rejection(store.finish(id, lease, null), 'stale_lease');
        expect(err.details).toMatchObject({ reason: 'deadline_passed' });
        expect(err.message, 'no advice to claim a job that will not run again').toMatch(
          /the job's deadline has passed\. .*Stop working on it; it will not run again\.$/,
        );
        expect(await store.claim('w2', 1_000)).toBeNull();
        expect(await job(id)).toMatchObject({ status: 'dead', deadReason: 'deadline_passed', token: 1 });
      });

      test('a pending job whose deadline passes before its runAt is quarantined by the next claim', async () => {
        const { store, enqueue, clock, job } = await setup();
        clock.set(0);
        const { id } = await enqueue({ deadline: 100, runAt: 500 });
        clock.set(100);
        expect(await store.claim('w1', 1_000)).toBeNull();
        expect(await job(id)).toMatchObject({ status: 'dead', deadReason: 'deadline_passed', token: 0 });
      });
    });

    describe('attempts (rule 5)', () => {
      test('an expired job with spent attempts is quarantined, never given a new token', async () => {
        const { store, enqueue, claim, clock, job } = await setup();
        const { id } = await enqueue({ maxAttempts: 2 });
        const first = await claim('w1', 1_000);
        clock.set(first.leaseUntil);
        const second = await claim('w2', 1_000);
        expect(second.attempt).toBe(2);
        clock.set(second.leaseUntil);
        expect(await store.claim('w3', 1_000)).toBeNull();
        expect(await job(id)).toMatchObject({
          status: 'dead',
          deadReason: 'attempts_exhausted',
          token: 2,
          attempts: 2,
        });
        await rejection(store.finish(id, second, null), 'stale_lease');
      });

      test('a fail that spends the last attempt makes the job dead', async () => {
        const { store, enqueue, claim } = await setup();
        await enqueue({ maxAttempts: 1 });
        const lease = await claim();
        const failed = await store.fail(lease.id, lease, 'fatal', 0);
        expect(failed).toMatchObject({ status: 'dead', deadReason: 'attempts_exhausted', lastError: 'fatal' });
        expect(await store.claim('w2', 1_000)).toBeNull();
      });
    });

    test('no theft by polling (rule 6): a valid lease is never handed out again', async () => {
      const { store, enqueue, claim, clock, job } = await setup();
      await enqueue();
      const lease = await claim('holder', 1_000);
      for (let i = 0; i < 50; i++) {
        clock.set(lease.leaseUntil - 50 + i);
        expect(await store.claim(`poller-${i}`, 1_000), `poll ${i} at ${clock.now()}`).toBeNull();
      }
      expect(await job(lease.id)).toMatchObject({ owner: 'holder', token: 1, attempts: 1 });
    });

    test('no lock is held after a claim (rule 7): another connection enqueues and claims during the send', async () => {
      const { store, enqueue, claim, openAnother } = await setup();
      await enqueue({ id: 'first' });
      const lease = await claim('sender');
      const other = await openAnother();
      try {
        // The worker is now "sending": the other connection must not wait on a lock.
        const started = performance.now();
        await other.enqueue(newJobInput({ id: 'second' }));
        const second = await other.claim('other', 1_000);
        const elapsedMs = performance.now() - started;
        expect(second?.id).toBe('second');
        expect(elapsedMs, 'enqueue + claim on another connection while a lease is held').toBeLessThan(1_000);
        expect((await store.finish(lease.id, lease, null)).status).toBe('done');
      } finally {
        await other.close();
      }
    });

    describe('late-finish policy (rule 9)', () => {
      test('if-unclaimed: the current token may still finish after expiry while nobody claimed', async () => {
        const { store, enqueue, claim, clock } = await setup('if-unclaimed');
        await enqueue();
        const lease = await claim('w1', 1_000);
        clock.set(lease.leaseUntil + 500);
        expect((await store.verify(lease.id, lease)).token).toBe(1);
        expect((await store.heartbeat(lease.id, lease, undefined)).leaseUntil).toBe(clock.now() + 1_000);
        clock.advance(5_000);
        expect((await store.finish(lease.id, lease, null)).status).toBe('done');
      });

      test('if-unclaimed: once someone claimed, the old token is refused', async () => {
        const { store, enqueue, claim, clock } = await setup('if-unclaimed');
        await enqueue();
        const lease = await claim('w1', 1_000);
        clock.set(lease.leaseUntil);
        await claim('w2', 1_000);
        const err = await rejection(store.finish(lease.id, lease, null), 'stale_lease');
        expect(err.details).toMatchObject({ reason: 'token_mismatch' });
      });

      test('if-unclaimed: the deadline still applies', async () => {
        const { store, enqueue, clock } = await setup('if-unclaimed');
        clock.set(0);
        await enqueue({ deadline: 100 });
        const lease = (await store.claim('w1', 50))!;
        clock.set(100);
        const err = await rejection(store.finish(lease.id, lease, null), 'stale_lease');
        expect(err.details).toMatchObject({ reason: 'deadline_passed' });
      });
    });

    describe('batch claims and finish-and-claim-next', () => {
      test('claimMany leases up to max jobs in claim order, each with its own next token', async () => {
        const { store, enqueue, clock, job } = await setup();
        const t = clock.now();
        await enqueue({ id: 'b-low' });
        await enqueue({ id: 'a-high', priority: 5 });
        await enqueue({ id: 'c-early', runAt: t - 10 });
        await enqueue({ id: 'd-low' });
        const leases = await store.claimMany('w1', 1_000, 3);
        expect(leases.map((l) => l.id)).toEqual(['a-high', 'c-early', 'b-low']);
        for (const lease of leases) {
          expect(lease).toMatchObject({ owner: 'w1', token: 1, attempt: 1, leaseUntil: t + 1_000 });
          expect(await job(lease.id)).toMatchObject({ status: 'leased', owner: 'w1', token: 1 });
        }
        expect((await job('d-low')).status).toBe('pending');
        expect((await store.claimMany('w2', 1_000, 10)).map((l) => l.id)).toEqual(['d-low']);
        expect(await store.claimMany('w3', 1_000, 10)).toEqual([]);
      });

      test('claimMany takes expired leases too, and quarantines spent ones instead of leasing them', async () => {
        const { store, enqueue, claim, clock, job } = await setup();
        await enqueue({ id: 'spent', maxAttempts: 1 });
        await enqueue({ id: 'retry', maxAttempts: 2 });
        await claim('w1', 100);
        await claim('w1', 100);
        clock.advance(100);
        const leases = await store.claimMany('w2', 1_000, 5);
        expect(leases.map((l) => [l.id, l.token])).toEqual([['retry', 2]]);
        expect(await job('spent')).toMatchObject({ status: 'dead', deadReason: 'attempts_exhausted', token: 1 });
      });

      test('finishAndClaim finishes, then leases the next job to the same owner in one step', async () => {
        const { store, enqueue, claim, clock, job } = await setup();
        await enqueue({ id: 'first' });
        await enqueue({ id: 'second' });
        const lease = await claim('w1', 2_000);
        clock.advance(10);
        const { job: done, next } = await store.finishAndClaim(lease.id, lease, { ok: true }, undefined);
        expect(done).toMatchObject({ id: 'first', status: 'done', result: { ok: true } });
        // Without a leaseMs of its own, the next lease is as long as the finished one.
        expect(next).toMatchObject({ id: 'second', owner: 'w1', token: 1, leaseUntil: clock.now() + 2_000 });
        expect(await job('second')).toMatchObject({ status: 'leased', owner: 'w1' });
        const last = await store.finishAndClaim(next!.id, next!, null, 500);
        expect(last.next).toBeNull();
      });

      test('a refused finishAndClaim claims nothing and changes nothing', async () => {
        const { store, enqueue, claim, clock, job } = await setup();
        await enqueue({ id: 'held' });
        await enqueue({ id: 'waiting' });
        const lease = await claim('w1', 100);
        clock.advance(100);
        const err = await rejection(store.finishAndClaim(lease.id, lease, null, 1_000), 'stale_lease');
        expect(err.details).toMatchObject({ reason: 'lease_expired' });
        expect(await job('waiting')).toMatchObject({ status: 'pending', token: 0 });
        expect(await job('held')).toMatchObject({ status: 'leased', token: 1 });
      });

      test('onClaimable fires after an enqueue and after a fail back to pending', async () => {
        const { store, enqueue, claim } = await setup();
        let calls = 0;
        const off = store.onClaimable(() => calls++);
        await enqueue({ id: 'x' });
        const afterEnqueue = calls;
        expect(afterEnqueue, 'calls after one enqueue').toBeGreaterThanOrEqual(1);
        const lease = await claim();
        await store.fail(lease.id, lease, 'boom', 0);
        expect(calls, 'calls after a fail back to pending').toBeGreaterThan(afterEnqueue);
        off();
        const before = calls;
        await enqueue({ id: 'y' });
        expect(calls, 'no calls after unsubscribing').toBe(before);
      });
    });

    test('verifyMany answers each lease as verify would, in the order asked, changing nothing', async () => {
      const { store, enqueue, claim, clock } = await setup();
      await enqueue({ id: 'v1' });
      await enqueue({ id: 'v2' });
      const one = await claim('w1', 1_000);
      const two = await claim('w2', 5_000);
      clock.advance(1_000);
      const rowsBefore = [await store.get(one.id), await store.get(two.id)];
      const answers = await store.verifyMany([
        { id: two.id, owner: 'w2', token: two.token },
        { id: one.id, owner: 'w1', token: one.token },
        { id: 'nope', owner: 'w1', token: 1 },
        { id: two.id, owner: 'w2', token: two.token + 1 },
      ]);
      expect(answers[0]).toEqual(two);
      expect(answers[1]).toBeInstanceOf(QueueError);
      expect((answers[1] as QueueError).details).toMatchObject({ reason: 'lease_expired' });
      expect((answers[2] as QueueError).code).toBe('unknown_job');
      expect((answers[3] as QueueError).details).toMatchObject({ reason: 'token_mismatch' });
      expect([await store.get(one.id), await store.get(two.id)], 'verifyMany changes nothing').toEqual(rowsBefore);
      expect(rowsBefore[0]?.status, 'an expired lease is still leased until claimed').toBe('leased');
    });

    test('list and stats count every status, zeros included', async () => {
      const { store, enqueue, claim } = await setup();
      expect(await store.stats()).toEqual({ pending: 0, leased: 0, done: 0, dead: 0 });
      await enqueue({ id: 'a' });
      await enqueue({ id: 'b' });
      await enqueue({ id: 'c', maxAttempts: 1 });
      const a = await claim();
      await store.finish(a.id, a, null);
      await claim();
      expect(await store.stats()).toEqual({ pending: 1, leased: 1, done: 1, dead: 0 });
      expect((await store.list({ status: 'pending', limit: 10 })).map((j) => j.id)).toEqual(['c']);
      expect((await store.list({ limit: 2 })).map((j) => j.id)).toEqual(['a', 'b']);
    });

    test('listPage cuts where payloads, results and errors pass maxBytes, one job at least, with next; listSummaries leaves them out', async () => {
      const { store, enqueue, claim } = await setup();
      const text = 'x'.repeat(1_000);
      // Each payload is {"text":"x...x"}: 1011 bytes of JSON text.
      for (const id of ['a', 'b', 'c', 'd', 'e']) await enqueue({ id, payload: { text } });
      const ids = (page: { jobs: Array<{ id: string }>; next: string | null }) => [
        page.jobs.map((j) => j.id),
        page.next,
      ];
      const first = await store.listPage({ limit: 10, maxBytes: 2_500 });
      expect(ids(first)).toEqual([['a', 'b'], 'b']);
      expect(first.jobs[0]!.payload).toEqual({ text });
      expect(ids(await store.listPage({ limit: 10, maxBytes: 2_500, after: 'b' }))).toEqual([['c', 'd'], 'd']);
      expect(ids(await store.listPage({ limit: 10, maxBytes: 2_500, after: 'd' }))).toEqual([['e'], null]);
      // Exactly at the budget the job is in; a job heavier than the whole budget comes alone.
      expect(ids(await store.listPage({ limit: 10, maxBytes: 2_022 }))).toEqual([['a', 'b'], 'b']);
      expect(ids(await store.listPage({ limit: 10, maxBytes: 2_021 }))).toEqual([['a'], 'a']);
      expect(ids(await store.listPage({ limit: 10, maxBytes: 1 }))).toEqual([['a'], 'a']);
      // The count still cuts, and says so.
      expect(ids(await store.listPage({ limit: 2, maxBytes: 1_000_000 }))).toEqual([['a', 'b'], 'b']);
      expect(ids(await store.listPage({ limit: 5, maxBytes: 1_000_000 }))).toEqual([['a', 'b', 'c', 'd', 'e'], null]);
      // A result and an error weigh too.
      const a = await claim();
      await store.finish(a.id, a, { text: 'y'.repeat(3_000) });
      const b = await claim();
      await store.fail(b.id, b, 'z'.repeat(2_000), 0);
      expect(ids(await store.listPage({ limit: 10, maxBytes: 4_100 }))).toEqual([['a'], 'a']);
      expect(ids(await store.listPage({ limit: 10, maxBytes: 4_100, after: 'a' }))).toEqual([['b', 'c'], 'c']);
      expect(ids(await store.listPage({ status: 'pending', limit: 10, maxBytes: 4_100 }))).toEqual([['b', 'c'], 'c']);
      expect(ids(await store.listPage({ limit: 10, maxBytes: 1_000, after: 'zzz' }))).toEqual([[], null]);

      const lean = await store.listSummaries({ limit: 3 });
      expect(ids(lean)).toEqual([['a', 'b', 'c'], 'c']);
      expect(lean.jobs[0]).toMatchObject({ id: 'a', status: 'done', owner: 'w1', token: 1, qty: 1 });
      for (const job of lean.jobs) {
        expect(job).not.toHaveProperty('payload');
        expect(job).not.toHaveProperty('result');
        expect(job).not.toHaveProperty('lastError');
      }
      expect(ids(await store.listSummaries({ status: 'pending', limit: 10 }))).toEqual([['b', 'c', 'd', 'e'], null]);
      expect(ids(await store.listSummaries({ limit: 10, after: 'c' }))).toEqual([['d', 'e'], null]);
    });

    describe('job lifecycle: release, cancel, retry', () => {
      test('release gives the job back: pending now, the attempt returned, and the next claim gets token + 1', async () => {
        const { store, enqueue, claim, clock, job } = await setup();
        await enqueue({ id: 'r' });
        const lease = await claim('w1', 1_000);
        clock.advance(10);
        const before = await job('r');
        let calls = 0;
        const off = store.onClaimable(() => calls++);
        const back = await store.release('r', lease);
        off();
        expect(back).toEqual(released(before, clock.now()));
        expect(back).toMatchObject({ status: 'pending', owner: null, leaseUntil: null, attempts: 0, token: 1 });
        expect(calls, 'claimable signal after a release').toBeGreaterThanOrEqual(1);
        expect(await claim('w2', 1_000)).toMatchObject({ id: 'r', owner: 'w2', token: 2, attempt: 1 });
        const err = await rejection(store.finish('r', lease, null), 'stale_lease');
        expect(err.details).toMatchObject({ reason: 'token_mismatch' });
      });

      test('a stale release is refused and changes nothing', async () => {
        const { store, enqueue, claim, clock, job } = await setup();
        await enqueue({ id: 'r' });
        const old = await claim('w1', 1_000);
        clock.set(old.leaseUntil);
        let err = await rejection(store.release('r', old), 'stale_lease');
        expect(err.details).toMatchObject({ reason: 'lease_expired', expected: { owner: 'w1', token: 1 } });
        const current = await claim('w2', 1_000);
        const before = await job('r');
        err = await rejection(store.release('r', old), 'stale_lease');
        expect(err.details).toMatchObject({ reason: 'token_mismatch', current: { owner: 'w2', token: 2 } });
        err = await rejection(store.release('r', { owner: 'w1', token: current.token }), 'stale_lease');
        expect(err.details).toMatchObject({ reason: 'owner_mismatch' });
        expect(await job('r')).toEqual(before);
        await rejection(store.release('nope', current), 'unknown_job');
        await store.release('r', current);
        err = await rejection(store.release('r', current), 'stale_lease');
        expect(err.details, 'a repeated release').toMatchObject({ reason: 'not_leased' });
      });

      test('if-unclaimed: the current token may still release after its lease expired, while nobody claimed', async () => {
        const { store, enqueue, claim, clock } = await setup('if-unclaimed');
        await enqueue({ id: 'late' });
        const lease = await claim('w1', 1_000);
        clock.set(lease.leaseUntil + 500);
        expect(await store.release('late', lease)).toMatchObject({ status: 'pending', attempts: 0, token: 1 });
      });

      test('cancel of a pending job: dead, cancelled, the reason kept; never claimed', async () => {
        const { store, enqueue, clock, job } = await setup();
        await enqueue({ id: 'c' });
        const before = await job('c');
        clock.advance(5);
        const gone = await store.cancel('c', 'the order was withdrawn');
        expect(gone).toEqual(cancelled(before, 'the order was withdrawn', clock.now()));
        expect(gone).toMatchObject({ status: 'dead', deadReason: 'cancelled', lastError: 'the order was withdrawn' });
        expect(await store.claim('w1', 1_000)).toBeNull();
        expect(await store.stats()).toEqual({ pending: 0, leased: 0, done: 0, dead: 1 });
      });

      test("cancel of a leased job: the holder's heartbeat, finish, fail and verify are refused as not_leased", async () => {
        const { store, enqueue, claim, job } = await setup();
        await enqueue({ id: 'c' });
        const lease = await claim('w1', 60_000);
        const gone = await store.cancel('c', undefined);
        expect(gone).toMatchObject({
          status: 'dead',
          deadReason: 'cancelled',
          owner: 'w1',
          token: 1,
          leaseUntil: null,
        });
        const refusals = [
          () => store.heartbeat('c', lease, undefined),
          () => store.finish('c', lease, null),
          () => store.fail('c', lease, 'late', undefined),
          () => store.verify('c', lease),
          () => store.release('c', lease),
        ];
        for (const refused of refusals) {
          const err = await rejection(refused(), 'stale_lease');
          expect(err.details).toMatchObject({ reason: 'not_leased', current: { status: 'dead', token: 1 } });
        }
        expect(await job('c')).toEqual(gone);
        expect(await store.claim('w2', 1_000)).toBeNull();
      });

      test('cancelling again answers the same job; a job dead for another reason is left as it is', async () => {
        const { store, enqueue, claim, clock, job } = await setup();
        await enqueue({ id: 'twice' });
        const first = await store.cancel('twice', 'first reason');
        clock.advance(10);
        expect(await store.cancel('twice', 'second reason')).toEqual(first);
        await enqueue({ id: 'spent', maxAttempts: 1 });
        const lease = await claim();
        const dead = await store.fail('spent', lease, 'fatal', undefined);
        expect(dead.deadReason).toBe('attempts_exhausted');
        expect(await store.cancel('spent', 'too late')).toEqual(dead);
        expect(await job('spent')).toEqual(dead);
      });

      test('cancel of a done job is job_finished and changes nothing; an unknown job is unknown_job', async () => {
        const { store, enqueue, claim, job } = await setup();
        await enqueue({ id: 'd' });
        const lease = await claim();
        const done = await store.finish('d', lease, { ok: true });
        const err = await rejection(store.cancel('d', 'oops'), 'job_finished');
        expect(err.status).toBe(409);
        expect(err.details).toEqual({ id: 'd', status: 'done' });
        expect(await job('d')).toEqual(done);
        await rejection(store.cancel('nope', undefined), 'unknown_job');
      });

      test('retry of a job whose attempts ran out: pending, attempts 0, the token keeps counting, old holders fenced', async () => {
        const { store, enqueue, claim, clock, job } = await setup();
        await enqueue({ id: 'spent', maxAttempts: 1 });
        const old = await claim('w1', 1_000);
        clock.set(old.leaseUntil);
        expect(await store.claim('w2', 1_000)).toBeNull();
        const dead = await job('spent');
        expect(dead).toMatchObject({ status: 'dead', deadReason: 'attempts_exhausted', token: 1 });
        clock.advance(100);
        let calls = 0;
        const off = store.onClaimable(() => calls++);
        const back = await store.retry('spent', {});
        off();
        expect(back).toEqual(retried(dead, {}, clock.now()));
        expect(back).toMatchObject({ status: 'pending', attempts: 0, deadReason: null, token: 1, maxAttempts: 1 });
        expect(calls, 'claimable signal after a retry').toBeGreaterThanOrEqual(1);
        let err = await rejection(store.finish('spent', old, null), 'stale_lease');
        expect(err.details, 'the holder from before, while pending').toMatchObject({ reason: 'not_leased' });
        const fresh = await claim('w3', 1_000);
        expect(fresh).toMatchObject({ token: 2, attempt: 1 });
        err = await rejection(store.finish('spent', old, null), 'stale_lease');
        expect(err.details, 'the holder from before, once claimed again').toMatchObject({ reason: 'token_mismatch' });
        expect((await store.finish('spent', fresh, null)).status).toBe('done');
      });

      test('retry of a cancelled job takes runAt and maxAttempts; lastError is kept', async () => {
        const { store, enqueue, claim, clock } = await setup();
        await enqueue({ id: 'later', maxAttempts: 5 });
        const first = await claim('w1', 1_000);
        await store.cancel('later', 'paused by hand');
        const back = await store.retry('later', { runAt: clock.now() + 100, maxAttempts: 2 });
        expect(back).toMatchObject({
          status: 'pending',
          runAt: clock.now() + 100,
          maxAttempts: 2,
          attempts: 0,
          lastError: 'paused by hand',
          token: first.token,
        });
        clock.advance(99);
        expect(await store.claim('w2', 1_000)).toBeNull();
        clock.advance(1);
        expect(await claim('w2', 1_000)).toMatchObject({ token: first.token + 1, attempt: 1 });
      });

      test('retry of a job that is not dead is not_dead and changes nothing; an unknown job is unknown_job', async () => {
        const { store, enqueue, claim, job } = await setup();
        await enqueue({ id: 'p' });
        await enqueue({ id: 'l' });
        await enqueue({ id: 'd' });
        const leased = await claim('w1');
        expect(leased.id).toBe('p');
        await claim('w1');
        const done = await claim('w1');
        await store.finish(done.id, done, null);
        await enqueue({ id: 'still-pending' });
        for (const id of ['still-pending', 'p', 'd']) {
          const before = await job(id);
          const err = await rejection(store.retry(id, { maxAttempts: 9 }), 'not_dead');
          expect(err.details).toEqual({ id, status: before.status });
          expect(await job(id)).toEqual(before);
        }
        await rejection(store.retry('nope', {}), 'unknown_job');
      });

      test('retry of a job past its deadline is deadline_passed and changes nothing; before it, the job is retried', async () => {
        const { store, enqueue, clock, job } = await setup();
        await enqueue({ id: 'due', deadline: clock.now() + 100 });
        await store.cancel('due', undefined);
        clock.advance(50);
        expect((await store.retry('due', {})).status).toBe('pending');
        await store.cancel('due', undefined);
        clock.advance(50);
        const before = await job('due');
        const err = await rejection(store.retry('due', {}), 'deadline_passed');
        expect(err.details).toEqual({ id: 'due', deadline: before.deadline, now: clock.now() });
        expect(await job('due')).toEqual(before);
        await enqueue({ id: 'quarantined', deadline: clock.now() + 10 });
        clock.advance(10);
        expect(await store.claim('w1', 1_000)).toBeNull();
        expect((await job('quarantined')).deadReason).toBe('deadline_passed');
        await rejection(store.retry('quarantined', {}), 'deadline_passed');
      });

      test('the dead jobs listed carry their deadReason', async () => {
        const { store, enqueue, claim } = await setup();
        await enqueue({ id: 'cancelled' });
        await enqueue({ id: 'spent', maxAttempts: 1 });
        await store.cancel('cancelled', 'not needed');
        const lease = await claim();
        await store.fail(lease.id, lease, 'fatal', undefined);
        const dead = await store.list({ status: 'dead', limit: 10 });
        expect(dead.map((j) => [j.id, j.deadReason, j.lastError])).toEqual([
          ['cancelled', 'cancelled', 'not needed'],
          ['spent', 'attempts_exhausted', 'fatal'],
        ]);
      });
    });
  });
}
