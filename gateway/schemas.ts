// The one request body the gateway takes, parsed once at the edge. Strict: an unknown field
// (a typo such as "tokn") is refused rather than ignored. Limits match the queue's, so a body
// that passes here is never refused by the queue for its shape.
import { z } from 'zod';
import { idSchema } from '../platform/ids.js';
import type { SendRequest } from './types.js';

const required = (what: string, kind: string) => (issue: { input?: unknown }) =>
  issue.input === undefined ? `${what} is required (${kind})` : `${what} must be ${kind}`;

const name = (what: string) => idSchema(what, required(what, 'a non-empty string'));

// zod's int() is a safe integer: anything beyond 2^53 - 1 is refused, as the contract asks.
const positive = (what: string) =>
  z.int({ error: required(what, 'a safe integer >= 1') }).min(1, `${what} must be >= 1`);

export const sendBody = z.strictObject(
  { jobId: name('jobId'), owner: name('owner'), token: positive('token'), qty: positive('qty') },
  {
    error: (issue) =>
      issue.code === 'unrecognized_keys'
        ? `unknown field ${issue.keys.map((k) => JSON.stringify(k)).join(', ')}; the body has only jobId, owner, token and qty`
        : 'the body must be a JSON object {jobId, owner, token, qty}',
  },
);

// The schema's output is exactly the wire type: a field added to one and not the other fails to compile.
const _sameShape: [SendRequest, z.infer<typeof sendBody>] extends [z.infer<typeof sendBody>, SendRequest]
  ? true
  : never = true;
void _sameShape;
