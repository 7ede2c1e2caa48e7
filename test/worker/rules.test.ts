// The worker's pure decisions: renewal interval, the estimate of the lease's end, and which
// answers mean the lease is gone.
import { describe, expect, test } from 'vitest';
import { GatewayError } from '../../gateway/errors.js';
import { QueueError, staleLeaseError } from '../../queue/errors.js';
import { estimateLeaseEnd, heartbeatIntervalMs, LeaseLostError, refusalOf } from '../../worker/index.js';

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
