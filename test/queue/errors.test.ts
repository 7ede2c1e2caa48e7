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

test('anyone else is told the lease is not current, and to claim again', () => {
  const other = staleLeaseError(
    'a',
    'not_leased',
    { owner: 'w2', token: 2 },
    {
      status: 'done',
      owner: 'w1',
      token: 3,
      leaseUntil: 5_000,
    },
  );
  expect(other.message).toMatch(/^Lease on job "a" is not current: the job is not leased\. .*claim again\.$/);
});
