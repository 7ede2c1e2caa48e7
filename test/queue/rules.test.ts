// Pure lease rules: no database, times given by hand.
import { describe, expect, test } from 'vitest';
import type { Job } from '../../queue/index.js';
import { claimDisposition, defaultRetryInMs, leaseUntilFor, leaseValid, staleReason } from '../../queue/index.js';
import { cancelDisposition, retryRefusal } from '../../queue/rules.js';
import { cancelled, claimed, released, retried } from './transitions.js';
import { fakeClock } from '../helpers/clock.js';

function job(overrides: Partial<Job> = {}): Job {
  return {
    id: 'j',
    qty: 1,
    payload: null,
    status: 'leased',
    owner: 'w1',
    token: 3,
    attempts: 1,
    maxAttempts: 5,
    priority: 0,
    leaseMs: 1_000,
    leaseUntil: 1_000,
    deadline: null,
    runAt: 0,
    result: null,
    lastError: null,
    deadReason: null,
    createdAt: 0,
    updatedAt: 0,
    ...overrides,
  };
}

describe('lease rules', () => {
  test('leaseUntil is capped by the deadline', () => {
    expect(leaseUntilFor(0, 1_000, 100)).toBe(100);
    expect(leaseUntilFor(0, 50, 100)).toBe(50);
    expect(leaseUntilFor(10, 50, null)).toBe(60);
  });

  test('valid before leaseUntil, ended at it', () => {
    expect(leaseValid(job(), 999)).toBe(true);
    expect(leaseValid(job(), 1_000)).toBe(false);
    expect(leaseValid(job({ status: 'done' }), 0)).toBe(false);
  });

  test('stale reasons come in the contract order', () => {
    const who = { owner: 'w1', token: 3 };
    expect(staleReason(job(), who, 999)).toBeNull();
    expect(staleReason(job({ status: 'pending' }), { owner: 'x', token: 9 }, 0)).toBe('not_leased');
    expect(staleReason(job(), { owner: 'x', token: 9 }, 5_000)).toBe('token_mismatch');
    expect(staleReason(job(), { owner: 'x', token: 3 }, 5_000)).toBe('owner_mismatch');
    expect(staleReason(job({ deadline: 1_000 }), who, 1_000)).toBe('deadline_passed');
    expect(staleReason(job(), who, 1_000)).toBe('lease_expired');
    expect(staleReason(job(), who, 1_000, 'if-unclaimed')).toBeNull();
    expect(staleReason(job({ deadline: 1_200 }), who, 1_200, 'if-unclaimed')).toBe('deadline_passed');
  });

  test('claim disposition: claim, skip, or quarantine with the reason', () => {
    expect(claimDisposition(job({ status: 'pending', runAt: 10 }), 10)).toEqual({ kind: 'claim' });
    expect(claimDisposition(job({ status: 'pending', runAt: 11 }), 10)).toEqual({ kind: 'skip' });
    expect(claimDisposition(job(), 999)).toEqual({ kind: 'skip' });
    expect(claimDisposition(job(), 1_000)).toEqual({ kind: 'claim' });
    expect(claimDisposition(job({ attempts: 5 }), 1_000)).toEqual({ kind: 'dead', reason: 'attempts_exhausted' });
    expect(claimDisposition(job({ status: 'pending', deadline: 5, runAt: 9 }), 5)).toEqual({
      kind: 'dead',
      reason: 'deadline_passed',
    });
    expect(claimDisposition(job({ status: 'done' }), 5_000)).toEqual({ kind: 'skip' });
  });

  test('default backoff grows with attempts and is capped', () => {
    expect(defaultRetryInMs(1)).toBe(1_000);
    expect(defaultRetryInMs(2)).toBe(2_000);
    expect(defaultRetryInMs(3)).toBe(4_000);
    expect(defaultRetryInMs(100)).toBe(300_000);
  });
});

describe('job lifecycle rules', () => {
  test('release: pending and claimable now, the attempt given back, nobody owns it, the token kept', () => {
    const clock = fakeClock(5_000);
    const held = job({ token: 4, attempts: 2, leaseUntil: 6_000, runAt: 100 });
    const back = released(held, clock.now());
    expect(back).toEqual({
      ...held,
      status: 'pending',
      owner: null,
      leaseUntil: null,
      attempts: 1,
      runAt: 5_000,
      updatedAt: 5_000,
    });
    expect(claimDisposition(back, clock.now())).toEqual({ kind: 'claim' });
    clock.advance(1);
    expect(claimed(back, 'w2', 1_000, clock.now())).toMatchObject({ token: 5, attempts: 2, owner: 'w2' });
    expect(released(job({ attempts: 0 }), 0).attempts, 'never below zero').toBe(0);
  });

  test('release fences the releasing holder: its lease is no longer current', () => {
    const clock = fakeClock(500);
    const back = released(job(), clock.now());
    expect(staleReason(back, { owner: 'w1', token: 3 }, clock.now())).toBe('not_leased');
  });

  test('cancel: live jobs are cancelled, dead ones left unchanged, done ones refused', () => {
    expect(['pending', 'leased', 'dead', 'done'].map((status) => cancelDisposition({ status } as Job))).toEqual([
      'cancel',
      'cancel',
      'unchanged',
      'finished',
    ]);
  });

  test('cancelled: dead for good, reason kept as lastError, owner and token as history, holder fenced', () => {
    const clock = fakeClock(700);
    const gone = cancelled(job({ lastError: 'earlier' }), 'customer withdrew', clock.now());
    expect(gone).toMatchObject({
      status: 'dead',
      deadReason: 'cancelled',
      lastError: 'customer withdrew',
      leaseUntil: null,
      owner: 'w1',
      token: 3,
      updatedAt: 700,
    });
    expect(cancelled(job({ lastError: 'earlier' }), undefined, clock.now()).lastError).toBe('earlier');
    expect(staleReason(gone, { owner: 'w1', token: 3 }, clock.now())).toBe('not_leased');
    expect(claimDisposition(gone, clock.now() + 1_000_000)).toEqual({ kind: 'skip' });
  });

  test('retry refusal: only dead jobs, and not past their deadline', () => {
    const clock = fakeClock(1_000);
    expect(retryRefusal(job({ status: 'dead' }), clock.now())).toBeNull();
    expect(retryRefusal(job({ status: 'dead', deadline: 1_001 }), clock.now())).toBeNull();
    expect(retryRefusal(job({ status: 'dead', deadline: 1_000 }), clock.now())).toBe('deadline_passed');
    for (const status of ['pending', 'leased', 'done'] as const) {
      expect({ status, refusal: retryRefusal(job({ status }), clock.now()) }).toEqual({ status, refusal: 'not_dead' });
    }
  });

  test('retried: pending with attempts 0, runAt and maxAttempts as given or kept, lastError kept, token never reset', () => {
    const clock = fakeClock(9_000);
    const dead = job({
      status: 'dead',
      deadReason: 'attempts_exhausted',
      attempts: 5,
      token: 7,
      lastError: 'boom',
      leaseUntil: null,
    });
    expect(retried(dead, {}, clock.now())).toEqual({
      ...dead,
      status: 'pending',
      owner: null,
      attempts: 0,
      deadReason: null,
      runAt: 9_000,
      updatedAt: 9_000,
    });
    expect(retried(dead, { maxAttempts: 2, runAt: 12_000 }, clock.now())).toMatchObject({
      maxAttempts: 2,
      runAt: 12_000,
      token: 7,
      lastError: 'boom',
    });
    const again = claimed(retried(dead, {}, clock.now()), 'w9', 1_000, clock.now());
    expect(again).toMatchObject({ token: 8, attempts: 1 });
    expect(staleReason(again, { owner: 'w1', token: 7 }, clock.now()), 'a holder from before stays fenced').toBe(
      'token_mismatch',
    );
  });
});
