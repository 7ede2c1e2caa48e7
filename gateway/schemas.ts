// The one request body the gateway takes, parsed once at the edge. Strict: an unknown field
// (a typo such as "tokn") is refused rather than ignored. Limits match the queue's and the
// receiver's, so a body that passes here is never refused downstream for its shape.
import { z } from 'zod';
import { effectBody, effectKey } from '../platform/effect-fields.js';
import { idSchema } from '../platform/ids.js';
import { requiresOneOf } from '../platform/openapi.js';
import type { SendRequest } from './types.js';

/** The limits of an effect's key and body: the receiver's (platform/effect-fields.ts). */
export { MAX_KEY_LENGTH } from '../platform/ids.js';
export { MAX_BODY_BYTES } from '../platform/effect-fields.js';

const required = (what: string, kind: string) => (issue: { input?: unknown }) =>
  issue.input === undefined ? `${what} is required (${kind})` : `${what} must be ${kind}`;

const name = (what: string) => idSchema(what, required(what, 'a non-empty string'));

// zod's int() is a safe integer: anything beyond 2^53 - 1 is refused, as the contract asks.
const positive = (what: string) =>
  z.int({ error: required(what, 'a safe integer >= 1') }).min(1, `${what} must be >= 1`);

// An effect's key and body by the receiver's own rules, so what passes here is never refused
// downstream for its shape. Parsed from JSON, a body is JSON already: typed as the wire's unknown.
const key = effectKey;
const body = effectBody as z.ZodType<unknown>;

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

/** The most sends one `POST /sends` carries. */
export const MAX_SENDS = 100;

// Several sends in one request, each exactly a `POST /send` body. A bad send refuses the whole
// request (nothing is verified or forwarded), its index in the message's path.
export const sendsBody = z.strictObject(
  {
    sends: z
      .array(sendBody, { error: 'sends must be an array of send bodies {jobId, owner, token, to?, key?, qty?, body?}' })
      .min(1, 'sends must not be empty')
      .max(MAX_SENDS, `sends must hold at most ${MAX_SENDS} entries`),
  },
  {
    error: (issue) =>
      issue.code === 'unrecognized_keys'
        ? `unknown field ${issue.keys.map((k) => JSON.stringify(k)).join(', ')}; the body has only sends`
        : 'the body must be a JSON object {sends: [...]}',
  },
);
