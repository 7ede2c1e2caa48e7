// The one request body the gateway takes, parsed once at the edge. Strict: an unknown field
// (a typo such as "tokn") is refused rather than ignored. Limits match the queue's and the
// receiver's, so a body that passes here is never refused downstream for its shape.
import { z } from 'zod';
import { idProblem, idSchema } from '../platform/ids.js';
import { requiresOneOf } from '../platform/openapi.js';
import type { SendRequest } from './types.js';

/** The most characters an effect's key may have (the id rule otherwise). */
export const MAX_KEY_LENGTH = 128;
/** The most bytes an effect's body may take, serialized as JSON. */
export const MAX_BODY_BYTES = 64 * 1024;

const required = (what: string, kind: string) => (issue: { input?: unknown }) =>
  issue.input === undefined ? `${what} is required (${kind})` : `${what} must be ${kind}`;

const name = (what: string) => idSchema(what, required(what, 'a non-empty string'));

// zod's int() is a safe integer: anything beyond 2^53 - 1 is refused, as the contract asks.
const positive = (what: string) =>
  z.int({ error: required(what, 'a safe integer >= 1') }).min(1, `${what} must be >= 1`);

const key = z
  .string({ error: 'key must be a string of 1 to 128 characters' })
  .min(1, 'key must not be empty')
  .max(MAX_KEY_LENGTH, `key must be at most ${MAX_KEY_LENGTH} characters`)
  .check((ctx) => {
    const problem = ctx.value.length === 0 ? undefined : idProblem(ctx.value, 'key');
    if (problem !== undefined) ctx.issues.push({ code: 'custom', message: problem, input: ctx.value });
  });

// Parsed from JSON, a body is JSON already; only its size is checked.
const body = z.unknown().check((ctx) => {
  const bytes = Buffer.byteLength(JSON.stringify(ctx.value) ?? '');
  if (bytes > MAX_BODY_BYTES) {
    ctx.issues.push({
      code: 'custom',
      message: `body must be at most ${MAX_BODY_BYTES} bytes serialized as JSON, not ${bytes}`,
      input: ctx.value,
    });
  }
});

const FIELDS = 'jobId, owner, token, to, key, qty and body';

export const sendBody = requiresOneOf(
  z
    .strictObject(
      {
        jobId: name('jobId'),
        owner: name('owner'),
        token: positive('token'),
        to: idSchema('to').optional(),
        key: key.optional(),
        qty: positive('qty').optional(),
        body: body.optional(),
      },
      {
        error: (issue) =>
          issue.code === 'unrecognized_keys'
            ? `unknown field ${issue.keys.map((k) => JSON.stringify(k)).join(', ')}; the body has only ${FIELDS}`
            : 'the body must be a JSON object {jobId, owner, token, to?, key?, qty?, body?}',
      },
    )
    .refine((send) => send.qty !== undefined || send.body !== undefined, {
      message: 'qty is required (a safe integer >= 1) unless a body is given',
      path: ['qty'],
    }),
  [['qty'], ['body']],
);

// The schema's output is exactly the wire type: a field added to one and not the other fails to compile.
const _sameShape: [SendRequest, z.infer<typeof sendBody>] extends [z.infer<typeof sendBody>, SendRequest]
  ? true
  : never = true;
void _sameShape;
