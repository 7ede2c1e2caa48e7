// What a stale_lease refusal says: what was presented, what the job is, and what to do next.
import { expect, test } from 'vitest';
import { staleLeaseError } from '../../queue/errors.js';

test('a repeated finish by the holder who just finished says the job is already done by you', () => {
  const repeat = staleLeaseError(
    'a',
    'not_leased',
    { owner: 'w1', token: 3 },
    {
      status: 'done',
      owner: 'w1',
      token: 3,
      leaseUntil: 5_000,
    },
  );
  expect(repeat.message).toBe(
    'Job "a" is already done: you already finished this job with owner "w1" token 3. Nothing more to do; do not claim it again.',
  );
  expect(repeat.details).toMatchObject({ reason: 'not_leased', expected: { owner: 'w1', token: 3 } });
});

test('anyone else is told the lease is not current, and to claim again only where a claim may bring work', () => {
  const refusal = (status: 'pending' | 'leased' | 'done' | 'dead', reason: 'not_leased' | 'token_mismatch') =>
    staleLeaseError('a', reason, { owner: 'w2', token: 2 }, { status, owner: 'w1', token: 3, leaseUntil: 5_000 })
      .message;
  const leased = refusal('leased', 'token_mismatch');
  expect(leased).toMatch(
    /^Lease on job "a" is not current: the token is not the current one .*Stop working on it and claim again\.$/,
  );
  const pending = refusal('pending', 'not_leased');
  expect(pending).toMatch(
    /^Lease on job "a" is not current: the job is not leased\. .*Stop working on it and claim again\.$/,
  );
  // A job that will not run again: claiming again would find nothing of it.
  const done = refusal('done', 'not_leased');
  expect(done).toMatch(
    /the job is not leased\. .*Stop working on it; it is done, under another lease, and will not run again\.$/,
  );
  expect(done).not.toContain('claim again');
  const dead = refusal('dead', 'not_leased');
  expect(dead).toMatch(
    /Stop working on it; it is dead \(cancelled or quarantined\) and will not run again unless an operator retries it\.$/,
  );
  expect(dead).not.toContain('claim again');
});
