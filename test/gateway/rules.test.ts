// The gateway's pure forwarding rules: no I/O, no clock — `now` and `random` are arguments.
import { describe, expect, test } from 'vitest';
import { GatewayError } from '../../gateway/errors.js';
import type { Exchange } from '../../platform/exchange.js';
import {
  attemptTimeoutMs,
  backoffMs,
  classifyAttempt,
  describeUpstreamFailure,
  failureOf,
  qtyMismatchOf,
  shouldRetry,
  upstreamStatus,
  type AttemptFailure,
  type RetryPolicy,
} from '../../gateway/rules.js';

const policy: RetryPolicy = {
  attempts: 3,
  budgetMs: 10_000,
  receiverTimeoutMs: 2_000,
  backoffBaseMs: 100,
  backoffMaxMs: 2_000,
};
const response = (status: number, body: unknown): Exchange => ({ kind: 'response', status, headers: {}, body });
const effect = { jobId: 'j', qty: 1, token: 1, appliedAt: 0 };

describe('qtyMismatchOf', () => {
  test("the job's qty passes", () => {
    expect(qtyMismatchOf({ jobId: 'j-1', qty: 3 }, { qty: 3 })).toBeUndefined();
  });

  test("another qty is 422 qty_mismatch, with the qty sent and the job's", () => {
    const refusal = qtyMismatchOf({ jobId: 'j-1', qty: 5 }, { qty: 3 });
    expect(refusal).toBeInstanceOf(GatewayError);
    const { code, status, message, details } = refusal!;
    expect({ code, status, message, details }).toEqual({
      code: 'qty_mismatch',
      status: 422,
      message: `The send's qty (5) is not job "j-1"'s qty (3); nothing was forwarded. Send the job's qty.`,
      details: { jobId: 'j-1', qty: 5, jobQty: 3 },
    });
  });

  test("the default effect without a qty is 422 qty_mismatch: it carries the job's qty", () => {
    const refusal = qtyMismatchOf({ jobId: 'j-1' }, { qty: 3 });
    expect({ code: refusal?.code, details: refusal?.details }).toEqual({
      code: 'qty_mismatch',
      details: { jobId: 'j-1', jobQty: 3 },
    });
    expect(refusal?.message).toContain('Send qty 3, or name another effect with key');
  });

  test("a keyed effect's qty is the worker's to choose: any qty, or none, passes", () => {
    expect(qtyMismatchOf({ jobId: 'j-1', key: 'email', qty: 9 }, { qty: 3 })).toBeUndefined();
    expect(qtyMismatchOf({ jobId: 'j-1', key: 'email' }, { qty: 3 })).toBeUndefined();
  });
});

describe('classifyAttempt', () => {
  test.each<[string, Exchange, string]>([
    ['201 applied', response(201, { outcome: 'applied', effect }), 'done'],
    ['200 duplicate', response(200, { outcome: 'duplicate', effect }), 'done'],
    ['200 without an outcome (not a receiver)', response(200, { hello: 1 }), 'bad'],
    ['200 with a text body', response(200, 'ok'), 'bad'],
    ['200 with no body', response(200, null), 'bad'],
    ['201 duplicate (201 is applied)', response(201, { outcome: 'duplicate', effect }), 'bad'],
    ['200 applied (200 is duplicate)', response(200, { outcome: 'applied', effect }), 'bad'],
    ['201 applied without the effect', response(201, { outcome: 'applied' }), 'bad'],
    ['202 accepted', response(202, { outcome: 'applied', effect }), 'bad'],
    ['409 fenced', response(409, { error: { code: 'fenced', highestToken: 3 } }), 'judged'],
    ['422 conflict', response(422, { error: { code: 'conflict' } }), 'judged'],
    ['409 with another code', response(409, { error: { code: 'job_exists' } }), 'bad'],
    ['422 with another code', response(422, { error: { code: 'unprocessable' } }), 'bad'],
    ['401 invalid_signature', response(401, { error: { code: 'invalid_signature' } }), 'rejected'],
    ['400 invalid_request', response(400, { error: { code: 'invalid_request' } }), 'rejected'],
    ['400 without an error body', response(400, 'Bad Request'), 'bad'],
    ['415 unsupported_media_type', response(415, { error: { code: 'unsupported_media_type' } }), 'rejected'],
    ['404 from something else', response(404, 'Not Found'), 'bad'],
    ['302 redirect', response(302, undefined), 'bad'],
    ['500', response(500, { error: { code: 'internal' } }), 'retry'],
    ['502 from a proxy, no body', response(502, undefined), 'retry'],
    ['503 busy', response(503, { error: { code: 'busy' } }), 'retry'],
    ['timeout', { kind: 'timeout', timeoutMs: 2_000 }, 'retry'],
    ['reset', { kind: 'reset', code: 'ECONNRESET', message: 'socket hang up' }, 'retry'],
    ['refused', { kind: 'refused', code: 'ECONNREFUSED', message: 'connect ECONNREFUSED' }, 'retry'],
    ['other network failure', { kind: 'network', code: 'ENOTFOUND', message: 'getaddrinfo ENOTFOUND' }, 'retry'],
    ['aborted by the caller', { kind: 'aborted' }, 'aborted'],
  ])('%s → %s', (_name, result, expected) => {
    expect(classifyAttempt(result)).toBe(expected);
  });
});

describe('backoffMs', () => {
  test('equal jitter: between half and all of an exponential ceiling', () => {
    expect([1, 2, 3, 4].map((attempt) => backoffMs(attempt, 0, policy))).toEqual([50, 100, 200, 400]);
    expect([1, 2, 3, 4].map((attempt) => backoffMs(attempt, 0.999_999, policy))).toEqual([100, 200, 400, 800]);
    expect(backoffMs(2, 0.5, policy)).toBe(150);
  });

  test('the ceiling is capped at backoffMaxMs, however many attempts', () => {
    expect(backoffMs(6, 0.999_999, policy)).toBe(2_000);
    expect(backoffMs(60, 0, policy)).toBe(1_000);
    expect(backoffMs(5_000, 0.999_999, policy)).toBe(2_000);
  });

  test('never zero, so no retry follows its failure at once', () => {
    for (const random of [0, 0.1, 0.5, 0.9])
      expect(backoffMs(1, random, { backoffBaseMs: 1, backoffMaxMs: 1 })).toBeGreaterThan(0);
  });
});

describe('shouldRetry', () => {
  const startedAt = 1_000_000;
  test('retries while attempts remain and the retry would start inside the budget', () => {
    expect(shouldRetry({ attempts: 1, startedAt }, startedAt + 2_000, policy, 100)).toEqual({
      retry: true,
      delayMs: 100,
    });
    // 9_700 + 100 ms of backoff leaves exactly MIN_ATTEMPT_MS (200 ms) for the attempt.
    expect(shouldRetry({ attempts: 2, startedAt }, startedAt + 9_700, policy, 100)).toEqual({
      retry: true,
      delayMs: 100,
    });
  });

  test('stops when the retry would leave less than MIN_ATTEMPT_MS for its attempt', () => {
    expect(shouldRetry({ attempts: 2, startedAt }, startedAt + 9_701, policy, 100)).toEqual({
      retry: false,
      spent: 'time',
    });
  });

  test('stops when the attempts are spent', () => {
    expect(shouldRetry({ attempts: 3, startedAt }, startedAt + 10, policy, 100)).toEqual({
      retry: false,
      spent: 'attempts',
    });
    expect(shouldRetry({ attempts: 1, startedAt }, startedAt, { ...policy, attempts: 1 }, 0)).toEqual({
      retry: false,
      spent: 'attempts',
    });
  });

  test('stops when the retry would start at or after the end of the budget', () => {
    expect(shouldRetry({ attempts: 1, startedAt }, startedAt + 9_900, policy, 100)).toEqual({
      retry: false,
      spent: 'time',
    });
    expect(shouldRetry({ attempts: 1, startedAt }, startedAt + 12_000, policy, 100)).toEqual({
      retry: false,
      spent: 'time',
    });
  });
});

describe('attemptTimeoutMs', () => {
  const startedAt = 5_000;
  test('the receiver timeout, shortened to what is left of the budget', () => {
    expect(attemptTimeoutMs({ attempts: 0, startedAt }, startedAt, policy)).toBe(2_000);
    expect(attemptTimeoutMs({ attempts: 2, startedAt }, startedAt + 9_000, policy)).toBe(1_000);
    expect(attemptTimeoutMs({ attempts: 2, startedAt }, startedAt + 9_800, policy)).toBe(200);
    // Less than MIN_ATTEMPT_MS left: not worth an attempt that could only time out.
    expect(attemptTimeoutMs({ attempts: 2, startedAt }, startedAt + 9_801, policy)).toBe(0);
    expect(attemptTimeoutMs({ attempts: 2, startedAt }, startedAt + 10_000, policy)).toBe(0);
    expect(attemptTimeoutMs({ attempts: 2, startedAt }, startedAt + 10_500, policy)).toBe(0);
  });
});

describe('failures: status and message', () => {
  const timeout = (attempt: number): AttemptFailure => failureOf({ kind: 'timeout', timeoutMs: 2_000 }, attempt);
  const reset = (attempt: number): AttemptFailure =>
    failureOf({ kind: 'reset', code: 'ECONNRESET', message: 'socket hang up' }, attempt);
  const refused = (attempt: number): AttemptFailure =>
    failureOf({ kind: 'refused', code: 'ECONNREFUSED', message: 'connect ECONNREFUSED' }, attempt);
  const busy = (attempt: number): AttemptFailure => failureOf(response(503, { error: { code: 'busy' } }), attempt);

  test('failureOf keeps what the caller needs to know', () => {
    expect(timeout(1)).toEqual({ attempt: 1, kind: 'timeout', timeoutMs: 2_000, message: 'no answer within 2000 ms' });
    expect(busy(2)).toEqual({ attempt: 2, kind: 'status', status: 503, code: 'busy', message: 'answered 503 busy' });
    expect(refused(3)).toMatchObject({ attempt: 3, kind: 'refused', code: 'ECONNREFUSED' });
  });

  test('504 when the last attempt timed out, 502 otherwise', () => {
    expect(upstreamStatus([reset(1), timeout(2)])).toBe(504);
    expect(upstreamStatus([timeout(1), reset(2)])).toBe(502);
    expect(upstreamStatus([busy(1)])).toBe(502);
    expect(upstreamStatus([refused(1)])).toBe(502);
  });

  test('all timeouts', () => {
    expect(describeUpstreamFailure([timeout(1), timeout(2), timeout(3)], 'attempts', 10_000)).toBe(
      'The receiver did not answer within 2000 ms on 3 attempts; the effect may or may not have been applied — resend, it is idempotent.',
    );
  });

  test('all refused: nothing was delivered', () => {
    expect(describeUpstreamFailure([refused(1), refused(2)], 'time', 3_000)).toBe(
      'The receiver refused the connection on 2 attempts (the 3000 ms retry budget ran out), so the effect was not delivered; check that it is running, and resend once it is back — it is idempotent.',
    );
  });

  test('all 5xx, all resets, and a mix', () => {
    expect(describeUpstreamFailure([busy(1), busy(2), busy(3)], 'attempts', 10_000)).toBe(
      'The receiver answered 503 (busy) on 3 attempts; the effect may or may not have been applied — resend, it is idempotent.',
    );
    expect(describeUpstreamFailure([reset(1)], 'attempts', 10_000)).toBe(
      'The receiver reset the connection on 1 attempt; the effect may or may not have been applied — resend, it is idempotent.',
    );
    expect(describeUpstreamFailure([reset(1)], 'attempts', 10_000, 'billing')).toBe(
      'Downstream "billing" reset the connection on 1 attempt; the effect may or may not have been applied — resend, it is idempotent.',
    );
    expect(describeUpstreamFailure([timeout(1), reset(2), busy(3)], 'attempts', 10_000)).toBe(
      'The receiver failed on 3 attempts (no answer within 2000 ms; connection reset; status 503 busy); the effect may or may not have been applied — resend, it is idempotent.',
    );
  });
});
