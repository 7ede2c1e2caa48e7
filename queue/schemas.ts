// One schema per request body, parsed once at the edge. Integers must be safe integers
// (zod's int), unknown fields are refused so a typo like "leaseMS" is not silently ignored.
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { idSchema, storableText } from '../platform/ids.js';
import { onlyParameters, queryInteger } from '../platform/query-params.js';
import type { NewJob } from './types.js';
import { DEFAULT_LEASE_MS, DEFAULT_MAX_ATTEMPTS } from './rules.js';

const MAX_LEASE_MS = 7 * 24 * 60 * 60 * 1000;

const name = (what: string) => idSchema(what);

interface IntegerRange {
  /** Default: the least safe integer. */
  min?: number;
  /** Default: the greatest safe integer, 2^53 - 1. */
  max?: number;
  /** Default: "<what> must be at least <min>". */
  below?: string;
  /** Default: "<what> must be at most <max>". */
  above?: string;
  /** Default: "<what> must be an integer". */
  notInteger?: string;
}

/**
 * zod's int() from `min` to `max`, each refusal in the field's own words. A whole number beyond
 * 2^53 - 1 (JSON can carry one, JavaScript cannot hold it exactly) is refused by zod before any
 * min() or max(), and would be said to be "not an integer": it is said to be out of range.
 */
function integer(what: string, range: IntegerRange = {}) {
  const { min = Number.MIN_SAFE_INTEGER, max = Number.MAX_SAFE_INTEGER } = range;
  const below = range.below ?? `${what} must be at least ${min}`;
  const above = range.above ?? `${what} must be at most ${max}`;
  const notInteger = range.notInteger ?? `${what} must be an integer`;
  return z
    .int({ error: (issue) => (issue.code === 'too_big' ? above : issue.code === 'too_small' ? below : notInteger) })
    .min(min, below)
    .max(max, above);
}

/**
 * The longest relative time (`deadlineMs`, `retryInMs`): 100 years. Added to any time a clock
 * can read (a Date reaches 8.64e15 ms at most) it stays below 2^53, so the deadline or runAt the
 * queue computes is always a safe integer.
 */
export const MAX_OFFSET_MS = 100 * 365.25 * 24 * 60 * 60 * 1000;
const offsetMs = (what: string, min: number) =>
  integer(what, {
    min,
    max: MAX_OFFSET_MS,
    ...(min === 0 ? { below: `${what} must be >= 0` } : {}),
    above: `${what} must be at most ${MAX_OFFSET_MS} (100 years)`,
  });

/** Free text, kept as sent except that what no store can keep (NUL, a lone surrogate) becomes U+FFFD. */
const text = (field: string, description: string, maxLength: number) =>
  z
    .string({ error: `${field} must be ${description}` })
    .max(maxLength, `${field} must be at most ${maxLength} characters`)
    .overwrite(storableText);
const epochMs = (what: string) =>
  integer(what, {
    min: 0,
    below: `${what} must be >= 0`,
    notInteger: `${what} must be an integer (epoch milliseconds)`,
  });
const token = integer('token', { min: 1, below: 'token must be >= 1' });
const leaseMs = integer('leaseMs', {
  min: 1,
  max: MAX_LEASE_MS,
  above: `leaseMs must be at most ${MAX_LEASE_MS} (7 days)`,
  notInteger: 'leaseMs must be an integer number of milliseconds',
});
const maxAttempts = integer('maxAttempts', { min: 1, max: 1000 });

/** The range of `priority`: PostgreSQL's `integer`, the column it is kept in. */
export const PRIORITY_MIN = -(2 ** 31);
export const PRIORITY_MAX = 2 ** 31 - 1;

export const enqueueBody = z.strictObject({
  id: name('id').optional(),
  qty: integer('qty', { min: 1, below: 'qty must be a positive integer' }),
  payload: z.json().optional(),
  deadline: epochMs('deadline').optional(),
  deadlineMs: offsetMs('deadlineMs', 1).optional(),
  maxAttempts: maxAttempts.default(DEFAULT_MAX_ATTEMPTS),
  runAt: epochMs('runAt').optional(),
  // PostgreSQL keeps it as an integer of 32 bits; SQLite is held to the same range.
  priority: integer('priority', { min: PRIORITY_MIN, max: PRIORITY_MAX }).default(0),
});

export const MAX_CLAIM_BATCH = 100;
export const MAX_CLAIM_WAIT_MS = 30_000;

export const claimBody = z.strictObject({
  owner: name('owner'),
  leaseMs: leaseMs.default(DEFAULT_LEASE_MS),
  /** With `max`, the answer is `{leases}`: between 1 and `max` of them. */
  max: integer('max', { min: 1, max: MAX_CLAIM_BATCH }).optional(),
  /** Long poll: wait up to this long for a job to become claimable before answering 204. */
  waitMs: integer('waitMs', {
    min: 0,
    max: MAX_CLAIM_WAIT_MS,
    below: 'waitMs must be >= 0',
    above: `waitMs must be at most ${MAX_CLAIM_WAIT_MS} (30 s)`,
    notInteger: 'waitMs must be an integer number of milliseconds',
  }).default(0),
});

export const heartbeatBody = z.strictObject({ owner: name('owner'), token, leaseMs: leaseMs.optional() });

/**
 * `next: true` or `{leaseMs?}` claims the next job for the same owner in the finish's
 * transaction; `false` is the same as leaving it out.
 */
const next = z.union([z.boolean(), z.strictObject({ leaseMs: leaseMs.optional() })], {
  error: 'next must be true, false or an object {leaseMs?}',
});

export const finishBody = z.strictObject({
  owner: name('owner'),
  token,
  result: z.json().optional(),
  next: next.optional(),
});

export const MAX_FINISHES = 100;

/** Several finishes of one owner (`POST /finishes`): 1 to 100, each job at most once. */
export const finishesBody = z.strictObject({
  owner: name('owner'),
  finishes: z
    .array(z.strictObject({ id: name('id'), token, result: z.json().optional() }), {
      error: 'finishes must be an array of {id, token, result?}',
    })
    .min(1, 'finishes must not be empty')
    .max(MAX_FINISHES, `finishes must hold at most ${MAX_FINISHES} entries`)
    .superRefine((finishes, ctx) => {
      const seen = new Set<string>();
      finishes.forEach(({ id }, i) => {
        if (seen.has(id))
          ctx.addIssue({
            code: 'custom',
            path: [i, 'id'],
            message: `finishes must name each job once, but "${id}" appears again`,
          });
        seen.add(id);
      });
    }),
  next: next.optional(),
});

export const failBody = z.strictObject({
  owner: name('owner'),
  token,
  error: text('error', 'a string describing what went wrong', 64 * 1024),
  retryInMs: offsetMs('retryInMs', 0).optional(),
});

export const verifyBody = z.strictObject({ owner: name('owner'), token });

export const releaseBody = z.strictObject({ owner: name('owner'), token });

/** Kept as the job's `lastError`; as long as a fail's `error` may be. */
export const cancelBody = z.strictObject({
  reason: text('reason', 'a string saying why the job is cancelled', 64 * 1024).optional(),
});

export const retryBody = z.strictObject({
  maxAttempts: maxAttempts.optional(),
  runAt: epochMs('runAt').optional(),
});

export const MAX_VERIFICATIONS = 100;

export const verificationsBody = z.strictObject({
  leases: z
    .array(z.strictObject({ id: name('id'), owner: name('owner'), token }), {
      error: 'leases must be an array of {id, owner, token}',
    })
    .min(1, 'leases must not be empty')
    .max(MAX_VERIFICATIONS, `leases must hold at most ${MAX_VERIFICATIONS} entries`),
});

export const jobIdParam = name('job id');

export const listQuery = z.strictObject(
  {
    status: z
      .enum(['pending', 'leased', 'done', 'dead'], { error: 'status must be pending, leased, done or dead' })
      .optional(),
    limit: queryInteger('limit')
      .pipe(integer('limit', { min: 1, max: 1000 }))
      .default(100),
    /** Pages on after this job (the `next` of the previous page), in order of enqueue. */
    after: name('after').optional(),
    /** `true`: jobs without payload, result and lastError, a page cut by `limit` alone. */
    lean: z
      .enum(['true', 'false'], { error: 'lean must be true or false' })
      .transform((value) => value === 'true')
      .optional(),
  },
  onlyParameters('GET /jobs', 'status, limit, after and lean'),
);

/**
 * The most a page of `GET /jobs` holds of payloads, results and errors, as stored: with jobs of
 * 1 MiB payloads a page holds 16 of them, whatever its `limit`, and `next` pages on.
 */
export const LIST_MAX_BYTES = 16 * 1024 * 1024;

/**
 * An enqueue body, already parsed with `enqueueBody`, as the store takes it. `sent` is the body
 * as it arrived: two enqueues of one id are the same when their canonical forms match.
 */
export function toNewJob(body: z.infer<typeof enqueueBody>, sent: unknown): NewJob {
  return {
    id: body.id ?? randomUUID(),
    qty: body.qty,
    payload: body.payload ?? null,
    maxAttempts: body.maxAttempts,
    priority: body.priority,
    runAt: body.runAt,
    deadline: body.deadline,
    deadlineMs: body.deadlineMs,
    request: canonicalRequest(sent),
  };
}

/** The request as sent, with keys in a stable order: two enqueues are "the same" when these match. */
export function canonicalRequest(body: unknown): string {
  return JSON.stringify(sortKeys(body));
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value && typeof value === 'object') {
    return Object.fromEntries(
      Object.keys(value)
        .sort()
        .map((k) => [k, sortKeys((value as Record<string, unknown>)[k])]),
    );
  }
  return value;
}
