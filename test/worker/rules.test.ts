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
  AUTO_PREFETCH_GIVE_BACK_MS,
  AUTO_PREFETCH_HOLD_MS,
  autoPrefetch,
  autoPrefetchSlack,
  type HandlerSpan,
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
  /** `n` turns of `ms` each, starting `everyMs` apart from 1000; `running` of them, the last, not returned yet. */
  const turns = (n: number, ms: number, everyMs = ms, running = 0): HandlerSpan[] =>
    Array.from({ length: n }, (_, i) => {
      const start = 1_000 + i * everyMs;
      return i >= n - running ? { start } : { start, end: start + ms };
    });
  /** The clock when the last of `spans` started: no time for those still running yet. */
  const lastStart = (spans: readonly HandlerSpan[]) => spans[spans.length - 1]!.start;
  const auto = (
    concurrency: number,
    spans: HandlerSpan[],
    options: { now?: number; max?: number; holding?: boolean } = {},
  ) =>
    autoPrefetch({
      concurrency,
      spans,
      now: options.now ?? lastStart(spans),
      max: options.max ?? 100 - concurrency,
      holding: options.holding ?? false,
    });

  test('concurrency x 20 ms / the handlers mean time, within max', () => {
    expect(AUTO_PREFETCH_HOLD_MS).toBe(20);
    // Handlers of 1 ms: 8 x 20 held ahead, within max.
    expect(auto(8, turns(16, 1))).toBe(92);
    expect(auto(8, turns(16, 1), { max: 30 })).toBe(30);
    expect(auto(1, turns(4, 1))).toBe(20);
    // 4 handlers of 10 ms: 8 turns free up per 20 ms.
    expect(auto(4, turns(8, 10))).toBe(8);
    // Exactly 20 ms for one handler: one; just longer: none.
    expect(auto(1, turns(4, 20))).toBe(1);
    expect(auto(1, turns(4, 21))).toBe(0);
  });

  test('the time handlers take, not the pace they start at: starts far apart (finishes in between) hold as many', () => {
    // 8 handlers of 12 ms whose next jobs come 10 ms after they return: 22 ms between starts,
    // fewer than 8 starts per 20 ms, yet 13 turns free up per 20 ms once leases wait for them.
    expect(auto(8, turns(16, 12, 22))).toBe(13);
  });

  test('at least concurrency or none: from concurrency up; once holding, from half of it up, raised to it', () => {
    // 8 handlers of 20 ms: a target of 8; of 21 ms: 7, none.
    expect(auto(8, turns(16, 20))).toBe(8);
    expect(auto(8, turns(16, 21))).toBe(0);
    // Holding already: 8 handlers of 21 ms keep 8 ahead, and of 40 ms (a target of 4) too; of 41 ms (3), none.
    expect(auto(8, turns(16, 21), { holding: true })).toBe(8);
    expect(auto(8, turns(16, 40), { holding: true })).toBe(8);
    expect(auto(8, turns(16, 41), { holding: true })).toBe(0);
    // 2 handlers: of 20 ms, 2; of 21, none; holding, of 40 ms (1) still 2, of 41 none.
    expect(auto(2, turns(4, 20))).toBe(2);
    expect(auto(2, turns(4, 21))).toBe(0);
    expect(auto(2, turns(4, 40), { holding: true })).toBe(2);
    expect(auto(2, turns(4, 41), { holding: true })).toBe(0);
    // Above the band, holding changes nothing.
    expect(auto(8, turns(16, 1), { holding: true })).toBe(auto(8, turns(16, 1)));
  });

  test('long jobs, one that runs on, an idle second, too few turns known or a still clock: none held ahead', () => {
    // Jobs of a second.
    expect(auto(2, turns(64, 1_000))).toBe(0);
    // 1 ms jobs, and the last one running: counted up to now, it soon outweighs the others
    // (4 x 20 ms over 3, 23, then 83 ms).
    const spans = turns(4, 1, 1, 1);
    expect(auto(1, spans, { now: lastStart(spans) })).toBe(26);
    expect(auto(1, spans, { now: lastStart(spans) + 20 })).toBe(3);
    expect(auto(1, spans, { now: lastStart(spans) + 80 })).toBe(0);
    // No handler started for a second: none; just before: as before.
    const idle = turns(16, 1);
    expect(AUTO_PREFETCH_GIVE_BACK_MS).toBe(1_000);
    expect(auto(2, idle, { now: lastStart(idle) + 999 })).toBe(40);
    expect(auto(2, idle, { now: lastStart(idle) + 1_000 })).toBe(0);
    // Fewer than 2 x concurrency turns (at least 4): none yet.
    expect(auto(8, turns(15, 1))).toBe(0);
    expect(auto(8, turns(16, 1))).toBe(92);
    expect(auto(1, turns(3, 1))).toBe(0);
    // A clock standing still (a test's manual clock) measures no time.
    expect(auto(1, turns(5, 0, 0))).toBe(0);
  });

  test('handlers far under the clock millisecond, each read as 0 while the clock moved: as many as allowed', () => {
    expect(auto(8, turns(16, 0, 1))).toBe(92);
    expect(auto(1, turns(4, 0, 1), { max: 10 })).toBe(10);
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
