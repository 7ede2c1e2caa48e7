// The worker's pure decisions: renewal interval, the estimate of the lease's end, which answers
// mean the lease is gone (a cancel among them), how much to claim, when a kept-alive connection
// may be reused, and where a generation's output lives and when it is an orphan.
import { describe, expect, test } from 'vitest';
import { GatewayError } from '../../gateway/errors.js';
import { QueueError, staleLeaseError } from '../../queue/errors.js';
import {
  claimSize,
  connectionIsFresh,
  estimateLeaseEnd,
  generationPath,
  heartbeatIntervalMs,
  jobFolderName,
  LeaseLostError,
  orphanGenerations,
  refusalOf,
  releasedEarlierBy,
  resultWithOutput,
  withDeadReason,
} from '../../worker/index.js';
import {
  AUTO_PREFETCH_HOLD_MS,
  autoPrefetch,
  autoPrefetchSlack,
  leaseIsShort,
  nextLeaseState,
  type LeaseState,
  type LeaseStep,
} from '../../worker/rules.js';
import { fakeClock } from '../helpers/clock.js';

describe('heartbeatIntervalMs', () => {
  test('is a third of the lease, never under 100 ms', () => {
    expect(heartbeatIntervalMs(1_500)).toBe(500);
    expect(heartbeatIntervalMs(30_000)).toBe(10_000);
    expect(heartbeatIntervalMs(1_000)).toBe(333);
    expect(heartbeatIntervalMs(300)).toBe(100);
    expect(heartbeatIntervalMs(200)).toBe(100);
  });
});

describe('estimateLeaseEnd', () => {
  test('counts the lease from when the request was sent, whatever the queue clock says', () => {
    expect(estimateLeaseEnd(1_000, 500, { leaseUntil: 99_999, deadline: null })).toBe(1_500);
    expect(estimateLeaseEnd(1_000, 500, { leaseUntil: 10, deadline: null })).toBe(1_500);
  });

  test('takes the deadline when it capped the lease', () => {
    expect(estimateLeaseEnd(1_000, 500, { leaseUntil: 1_200, deadline: 1_200 })).toBe(1_200);
    // Not capped: the deadline is later than the lease.
    expect(estimateLeaseEnd(1_000, 500, { leaseUntil: 1_400, deadline: 5_000 })).toBe(1_500);
  });
});

describe('refusalOf', () => {
  const current = { status: 'leased' as const, owner: 'w2', token: 3, leaseUntil: 9 };

  test("the queue's stale_lease and unknown_job, with reason and current", () => {
    expect(refusalOf(staleLeaseError('j', 'token_mismatch', { owner: 'w1', token: 2 }, current))).toMatchObject({
      code: 'stale_lease',
      status: 409,
      reason: 'token_mismatch',
      current,
    });
    expect(refusalOf(new QueueError('unknown_job', 'no such job'))).toMatchObject({
      status: 404,
      reason: 'unknown_job',
    });
  });

  test("the gateway's stale_lease (the queue's words passed on) and the receiver's fenced", () => {
    const stale = new GatewayError('stale_lease', 'not current', {
      reason: 'lease_expired',
      expected: { owner: 'w1', token: 1 },
      current,
    });
    expect(refusalOf(stale)).toMatchObject({ code: 'stale_lease', reason: 'lease_expired', current });
    expect(refusalOf(new GatewayError('fenced', 'lower token', { highestToken: 4 }))).toMatchObject({
      status: 409,
      reason: 'fenced',
    });
  });

  test('anything that is not a verdict on the lease is not a refusal', () => {
    expect(refusalOf(new QueueError('queue_unavailable', 'down'))).toBeNull();
    expect(refusalOf(new GatewayError('conflict', 'other qty'))).toBeNull();
    expect(
      refusalOf(new GatewayError('qty_mismatch', "not the job's qty", { jobId: 'j', qty: 5, jobQty: 3 })),
    ).toBeNull();
    expect(refusalOf(new GatewayError('upstream_unavailable', 'down'))).toBeNull();
    expect(refusalOf(new Error('boom'))).toBeNull();
  });
});

describe('LeaseLostError', () => {
  test('says what was held, why it was lost and what the job is now', () => {
    const error = new LeaseLostError({
      jobId: 'j',
      expected: { owner: 'w1', token: 1 },
      during: 'finish',
      reason: 'token_mismatch',
      current: { status: 'leased', owner: 'w2', token: 2, leaseUntil: 5 },
    });
    expect(error.message).toBe(
      'Lease on job "j" (owner "w1" token 1) is lost, found during finish: the job was claimed again under a newer token. The job now has status leased, owner "w2", token 2. Nothing more is done under this token.',
    );
    expect(error.confirmed).toBe(true);
    expect(
      new LeaseLostError({ jobId: 'j', expected: { owner: 'w1', token: 1 }, during: 'renew', reason: 'not_renewed' })
        .confirmed,
    ).toBe(false);
  });
});

describe('a cancelled job', () => {
  const dead = { status: 'dead' as const, owner: 'w1', token: 1, leaseUntil: null };
  const refusal = refusalOf(staleLeaseError('j', 'not_leased', { owner: 'w1', token: 1 }, dead))!;

  test("is a not_leased refusal of a dead job whose deadReason says so: the loss's reason is cancelled", () => {
    expect(refusal.reason).toBe('not_leased');
    expect(withDeadReason(refusal, { status: 'dead', deadReason: 'cancelled' }).reason).toBe('cancelled');
  });

  test('a job quarantined after its lease ended, or a row that could not be read, stays not_leased', () => {
    expect(withDeadReason(refusal, { status: 'dead', deadReason: 'attempts_exhausted' }).reason).toBe('not_leased');
    expect(withDeadReason(refusal, { status: 'dead', deadReason: 'deadline_passed' }).reason).toBe('not_leased');
    expect(withDeadReason(refusal, undefined).reason).toBe('not_leased');
    const done = refusalOf(staleLeaseError('j', 'not_leased', { owner: 'w1', token: 1 }, { ...dead, status: 'done' }))!;
    expect(withDeadReason(done, { status: 'dead', deadReason: 'cancelled' }).reason).toBe('not_leased');
  });

  test('LeaseLostError says it was cancelled, and counts as confirmed', () => {
    const error = new LeaseLostError({
      jobId: 'j',
      expected: { owner: 'w1', token: 1 },
      during: 'renew',
      reason: 'cancelled',
      current: dead,
    });
    expect(error.message).toContain('the job was cancelled');
    expect(error.confirmed).toBe(true);
  });
});

describe('releasedEarlierBy', () => {
  test('a repeated release finds the job pending at its own token: the first one landed', () => {
    const pendingAt = (token: number) =>
      refusalOf(
        staleLeaseError(
          'j',
          'not_leased',
          { owner: 'w1', token: 2 },
          { status: 'pending', owner: null, token, leaseUntil: null },
        ),
      )!;
    expect(releasedEarlierBy(pendingAt(2), 2)).toBe(true);
    // Claimed again since (a higher token), or pending at a token that is not this one.
    expect(releasedEarlierBy(pendingAt(3), 2)).toBe(false);
  });
});

describe('nextLeaseState', () => {
  const states: LeaseState[] = ['claimed', 'held', 'settling', 'refused', 'lost', 'ended'];
  const steps: LeaseStep[] = ['start', 'stop', 'refuse', 'lose', 'settle'];

  test('every state and step: a lease is refused or lost only while held or settling, and nothing leaves lost or ended', () => {
    const table = Object.fromEntries(
      states.map((state) => [state, Object.fromEntries(steps.map((step) => [step, nextLeaseState(state, step)]))]),
    );
    expect(table).toEqual({
      claimed: { start: 'held', stop: 'settling', refuse: undefined, lose: undefined, settle: undefined },
      held: { start: undefined, stop: 'settling', refuse: 'refused', lose: 'lost', settle: undefined },
      settling: { start: undefined, stop: undefined, refuse: 'refused', lose: 'lost', settle: 'ended' },
      refused: { start: undefined, stop: 'refused', refuse: 'refused', lose: 'lost', settle: undefined },
      lost: { start: undefined, stop: 'lost', refuse: 'lost', lose: 'lost', settle: undefined },
      ended: { start: undefined, stop: undefined, refuse: undefined, lose: undefined, settle: undefined },
    });
  });
});

describe('leaseIsShort', () => {
  // A 900 ms lease renews every 300 ms: on schedule, at least 600 ms of it is left.
  const lease = { leaseMs: 900, heartbeatMs: 300 };

  test('on schedule a lease is never short for a send faster than an interval', () => {
    expect(leaseIsShort({ ...lease, leftMs: 900, expectedSendMs: 0 })).toBe(false);
    expect(leaseIsShort({ ...lease, leftMs: 600, expectedSendMs: 250 })).toBe(false);
  });

  test('short below one interval plus the expected send: before, exactly at, after the boundary', () => {
    expect(leaseIsShort({ ...lease, leftMs: 349, expectedSendMs: 50 })).toBe(true);
    expect(leaseIsShort({ ...lease, leftMs: 350, expectedSendMs: 50 })).toBe(false);
    expect(leaseIsShort({ ...lease, leftMs: 351, expectedSendMs: 50 })).toBe(false);
  });

  test('however slow the sends, a lease with what a renewal leaves is not short: renewing could not give more', () => {
    expect(leaseIsShort({ ...lease, leftMs: 599, expectedSendMs: 5_000 })).toBe(true);
    expect(leaseIsShort({ ...lease, leftMs: 600, expectedSendMs: 5_000 })).toBe(false);
    expect(leaseIsShort({ ...lease, leftMs: 880, expectedSendMs: 5_000 })).toBe(false);
  });

  test('a lease past its estimated end is short', () => {
    expect(leaseIsShort({ ...lease, leftMs: -5, expectedSendMs: 0 })).toBe(true);
  });
});

describe('claimSize', () => {
  test('the free slots, never more than what is left of maxJobs, never negative', () => {
    expect(claimSize({ concurrency: 4, running: 0, budget: Infinity })).toBe(4);
    expect(claimSize({ concurrency: 4, running: 3, budget: Infinity })).toBe(1);
    expect(claimSize({ concurrency: 4, running: 1, budget: 2 })).toBe(2);
    expect(claimSize({ concurrency: 4, running: 4, budget: 10 })).toBe(0);
    expect(claimSize({ concurrency: 4, running: 0, budget: -1 })).toBe(0);
  });

  test('with prefetch, the slots are concurrency + prefetch: leases running or waiting for a turn', () => {
    expect(claimSize({ concurrency: 1, prefetch: 2, running: 0, budget: Infinity })).toBe(3);
    expect(claimSize({ concurrency: 1, prefetch: 2, running: 2, budget: Infinity })).toBe(1);
    expect(claimSize({ concurrency: 4, prefetch: 4, running: 3, budget: 2 })).toBe(2);
    expect(claimSize({ concurrency: 4, prefetch: 0, running: 4, budget: 10 })).toBe(0);
  });
});

describe("autoPrefetch (prefetch: 'auto')", () => {
  /** `n` starts `everyMs` apart, from 1000. */
  const paced = (n: number, everyMs: number) => Array.from({ length: n }, (_, i) => 1_000 + i * everyMs);

  test('as many leases as the handlers start in 20 ms at their pace, within max', () => {
    expect(AUTO_PREFETCH_HOLD_MS).toBe(20);
    // 17 starts over 16 ms: one per ms, 20 held ahead.
    const starts = paced(17, 1);
    expect(autoPrefetch({ concurrency: 8, starts, now: 1_016, max: 92 })).toBe(20);
    expect(autoPrefetch({ concurrency: 8, starts, now: 1_016, max: 5 })).toBe(5);
    // 4 starts 10 ms apart: 3 in 30 ms, 0.1 per ms, 2 held ahead; at 20 ms apart, exactly 1.
    expect(autoPrefetch({ concurrency: 1, starts: paced(4, 10), now: 1_030, max: 99 })).toBe(2);
    expect(autoPrefetch({ concurrency: 1, starts: paced(4, 20), now: 1_060, max: 99 })).toBe(1);
    // Just slower than one start per 20 ms: none.
    expect(autoPrefetch({ concurrency: 1, starts: paced(4, 21), now: 1_063, max: 99 })).toBe(0);
  });

  test('long jobs, an idle spell, or too few starts known: none held ahead', () => {
    // One start a second: none.
    expect(autoPrefetch({ concurrency: 2, starts: paced(64, 1_000), now: 64_000, max: 98 })).toBe(0);
    // A quick pace, then idle: measured up to now, it fades (20 at once, 2 after 150 ms, 0 after 300).
    const starts = paced(17, 1);
    expect(autoPrefetch({ concurrency: 2, starts, now: 1_016, max: 98 })).toBe(20);
    expect(autoPrefetch({ concurrency: 2, starts, now: 1_016 + 144, max: 98 })).toBe(2);
    expect(autoPrefetch({ concurrency: 2, starts, now: 1_016 + 300, max: 98 })).toBe(0);
    // At least concurrency, or none: 1.6 per 20 ms is none for 2 handlers, one for 1.
    expect(autoPrefetch({ concurrency: 2, starts, now: 1_016 + 184, max: 98 })).toBe(0);
    expect(autoPrefetch({ concurrency: 1, starts, now: 1_016 + 184, max: 99 })).toBe(1);
    // Fewer than 2 x concurrency starts (at least 4): none yet.
    expect(autoPrefetch({ concurrency: 8, starts: paced(15, 1), now: 1_014, max: 92 })).toBe(0);
    expect(autoPrefetch({ concurrency: 8, starts: paced(16, 1), now: 1_015, max: 92 })).toBe(20);
    expect(autoPrefetch({ concurrency: 1, starts: paced(3, 1), now: 1_002, max: 99 })).toBe(0);
    // A clock standing still (a test's manual clock) measures no pace.
    expect(autoPrefetch({ concurrency: 1, starts: [5, 5, 5, 5, 5], now: 5, max: 99 })).toBe(0);
  });
});

describe('autoPrefetchSlack', () => {
  test('claims more when short of concurrency, or of the target by half of it; never for a lease or two of a large target', () => {
    const at = (held: number, target = 16) => autoPrefetchSlack({ concurrency: 8, target, held }).claimMore;
    expect(at(7), 'a handler without a lease').toBe(true);
    expect(at(16), '8 short of 8 + 16').toBe(true);
    expect(at(17), '7 short').toBe(false);
    expect(at(23), '1 short').toBe(false);
    expect(at(24), 'at the target').toBe(false);
    // A target of 1: one short is worth a claim.
    expect(at(8, 1)).toBe(true);
    expect(at(9, 1)).toBe(false);
    // No target: only the handlers' own leases.
    expect(at(8, 0)).toBe(false);
    expect(at(3, 0)).toBe(true);
  });

  test('ends a slot only while more than concurrency + twice the target are held', () => {
    const ends = (held: number, target: number) => autoPrefetchSlack({ concurrency: 8, target, held }).endSlot;
    expect(ends(40, 16)).toBe(false);
    expect(ends(41, 16)).toBe(true);
    // The pace fell to nothing: back to the handlers' own leases.
    expect(ends(9, 0)).toBe(true);
    expect(ends(8, 0)).toBe(false);
  });
});

describe('connectionIsFresh', () => {
  test('judged by the clock when the next request is made: a pause of any length makes it stale', () => {
    const clock = fakeClock();
    const idleSince = clock.now();
    clock.advance(1_999);
    expect(connectionIsFresh(idleSince, clock.now(), 2_000)).toBe(true);
    clock.advance(1);
    expect(connectionIsFresh(idleSince, clock.now(), 2_000)).toBe(false);
    // A SIGSTOP of a minute: no timer ran meanwhile, the verdict is the same.
    clock.advance(60_000);
    expect(connectionIsFresh(idleSince, clock.now(), 2_000)).toBe(false);
  });

  test('a clock that went backwards proves nothing: stale', () => {
    expect(connectionIsFresh(10_000, 9_000, 2_000)).toBe(false);
  });
});

describe('jobFolderName', () => {
  test('one folder name per id: no separator, no . or .., no alias', () => {
    const ids = [
      'a',
      'a/b',
      '..',
      '.',
      '...',
      '%2E',
      'a%2Fb',
      'a\\b',
      'é',
      '.hidden',
      ' ',
      'x'.repeat(256),
      '\u{1F600}'.repeat(128),
    ];
    const names = ids.map(jobFolderName);
    expect(new Set(names).size).toBe(ids.length);
    for (const name of names) {
      expect(name).not.toMatch(/[/\\\0]/);
      expect(['.', '..']).not.toContain(name);
      expect(name.length).toBeLessThanOrEqual(201);
    }
    expect(jobFolderName('a/b')).toBe('a%2Fb');
    expect(jobFolderName('..')).toBe('%2E%2E');
    expect(jobFolderName('.')).toBe('%2E');
    expect(jobFolderName('...')).toBe('...');
    expect(jobFolderName('\u{1F600}'.repeat(128))).toMatch(/^@[0-9a-f]{64}$/);
    expect(generationPath('a/b', 7)).toBe('a%2Fb/7');
  });
});

describe('orphanGenerations', () => {
  const job = (token: number, status: 'leased' | 'done' | 'pending', result: unknown = null) => ({
    id: 'j',
    token,
    status,
    result,
  });

  test("below the current token and not the recorded winner: the current holder's and newer ones are kept", () => {
    expect(orphanGenerations(job(3, 'leased'), [1, 2, 3, 4])).toEqual([1, 2]);
    expect(orphanGenerations(job(3, 'done', { output: 'j/3' }), [1, 2, 3])).toEqual([1, 2]);
    expect(orphanGenerations(job(1, 'leased'), [1])).toEqual([]);
  });

  test('the winner a finish recorded is kept even below the current token', () => {
    expect(orphanGenerations(job(5, 'done', { output: 'j/2' }), [1, 2, 4])).toEqual([1, 4]);
    // Only a done job has a winner.
    expect(orphanGenerations(job(5, 'pending', { output: 'j/2' }), [1, 2])).toEqual([1, 2]);
  });

  test('a claim racing with the cleanup only raises the token: judged on the row read first, nothing new is taken', () => {
    const read = job(2, 'leased');
    // Listed after a claim made token 3 and its holder created its folder.
    expect(orphanGenerations(read, [1, 2, 3])).toEqual([1]);
  });
});

describe('resultWithOutput', () => {
  test("the handler's result with output set; a value that is not an object is kept under value", () => {
    expect(resultWithOutput(undefined, 'j/1')).toEqual({ output: 'j/1' });
    expect(resultWithOutput({ n: 1, output: 'mine' }, 'j/1')).toEqual({ n: 1, output: 'j/1' });
    expect(resultWithOutput('applied', 'j/1')).toEqual({ value: 'applied', output: 'j/1' });
    expect(resultWithOutput([1], 'j/1')).toEqual({ value: [1], output: 'j/1' });
    expect(resultWithOutput(null, 'j/1')).toEqual({ value: null, output: 'j/1' });
  });
});
