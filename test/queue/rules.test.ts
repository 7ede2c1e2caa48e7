// Pure lease rules: no database, times given by hand.
import { describe, expect, test } from 'vitest';
import type { Job } from '../../queue/index.js';
import { claimDisposition, defaultRetryInMs, leaseUntilFor, leaseValid, staleReason } from '../../queue/index.js';

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
