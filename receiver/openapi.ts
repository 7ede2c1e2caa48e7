// The receiver's OpenAPI document: `POST /effects` with the schema its handler parses
// (middleware.ts) and the Fencing-Token header, the reads, and the test-mode admin routes when
// the app has them. A route added to the app and not here fails test/receiver/app-openapi.test.ts.
import { z } from 'zod';
import {
  openApiDocument,
  requiresOneOf,
  serviceRoutes,
  type OpenApiDocument,
  type OperationDoc,
} from '../platform/openapi.js';
import { packageVersion } from '../platform/package-version.js';
import { RECEIVER_ERROR_STATUS } from './errors.js';
import { faultSchema } from './faults.js';
import { effectQuery, effectsQuery, jobIdParam, journalQuery } from './listings.js';
import { effectBodySchema } from './schemas.js';

/** An effect's own fields: `key` absent for the job's default effect, `qty` and `body` when given. */
const fields = {
  jobId: z.string(),
  key: z.string().optional(),
  qty: z.int().optional(),
  body: z.json().optional().describe('as given, object keys sorted'),
};
const Effect = z.object({ ...fields, token: z.int(), appliedAt: z.int() });
const JournalEntry = z.object({
  seq: z.int(),
  ...fields,
  token: z.int(),
  outcome: z.enum(['applied', 'duplicate', 'fenced', 'conflict']),
  at: z.int(),
});
const Totals = z.object({ effects: z.int(), qty: z.int() });
const Fault = z.union([
  z.object({ kind: z.literal('delay'), ms: z.int() }),
  z.object({ kind: z.literal('fail'), status: z.int() }),
  z.object({ kind: z.literal('drop') }),
]);
const faults = z.object({ faults: z.array(Fault) });

/** The header as parseFencingToken reads it: digits, a safe integer >= 1, surrounding spaces allowed. */
const fencingToken = z.string().regex(/^\s*0*[1-9][0-9]{0,15}\s*$/);

/** Every answer of POST /effects carries it; the batch itself is docs/downstream-protocol.md's extension. */
const BATCH_OFFER =
  'the target batches of effects go to (`/effects?batch`): `{effects: [{jobId, key?, qty?, body?, token}, ...]}`, 1 to 100, answered `200 {results: [{status, body}, ...]}` (docs/downstream-protocol.md, batches)';

export const RECEIVER_OPERATIONS: readonly OperationDoc[] = [
  {
    method: 'post',
    path: '/effects',
    summary:
      "Record an effect once per (jobId, key), under a fencing token: a token lower than the job's highest, by any of its effects, is fenced.",
    headers: {
      'Fencing-Token': {
        schema: fencingToken,
        required: true,
        description: "the current lease's token, a safe integer >= 1",
      },
      'Leasehold-Signature': {
        schema: z.string(),
        required: false,
        description:
          '`t=<epoch ms>,v2=<hex HMAC-SHA256 of "<t>.<token>.<METHOD> <path>.<body>">`; required when the receiver has a secret (docs/receiver.md)',
      },
    },
    // The handler's refinement, stated in the document: a request without qty needs a body.
    body: requiresOneOf(effectBodySchema, [['qty'], ['body']]),
    responses: {
      201: {
        description: 'applied: the first request for the (jobId, key)',
        schema: z.object({ outcome: z.literal('applied'), effect: Effect }),
        headers: { 'Leasehold-Batch': BATCH_OFFER },
      },
      200: {
        description:
          "duplicate: the same (jobId, key), qty and body again with a token >= the job's highest; nothing added",
        schema: z.object({ outcome: z.literal('duplicate'), effect: Effect }),
        headers: { 'Idempotent-Replayed': '`true`', 'Leasehold-Batch': BATCH_OFFER },
      },
    },
    errors: ['fenced', 'conflict', 'invalid_signature', 'apply_failed', 'busy'],
  },
  {
    method: 'get',
    path: '/effects',
    summary:
      "A page of the applied effects, by jobId and key (a job's default effect first), of every job or of `jobId`'s; `next` is the `after` of the next page, null after the last.",
    query: effectsQuery,
    responses: {
      200: {
        description: 'a page of effects',
        schema: z.object({ effects: z.array(Effect), next: z.string().nullable() }),
      },
    },
    errors: ['busy'],
  },
  {
    method: 'get',
    path: '/effects/:jobId',
    summary: "One job's default effect, or with `key` its keyed effect.",
    params: { jobId: jobIdParam },
    query: effectQuery,
    responses: { 200: { description: 'the effect', schema: z.object({ effect: Effect }) } },
    errors: ['unknown_effect', 'busy'],
  },
  {
    method: 'get',
    path: '/totals',
    summary: 'How many effects were applied, and the sum of their quantities.',
    responses: { 200: { description: 'the totals', schema: Totals } },
    errors: ['busy'],
  },
  {
    method: 'get',
    path: '/journal',
    summary: 'A page of the judged requests, in order, with their outcomes; `next` is the `after` of the next page.',
    query: journalQuery,
    responses: {
      200: {
        description: 'a page of the journal',
        schema: z.object({ journal: z.array(JournalEntry), next: z.int().nullable() }),
      },
    },
    errors: ['busy'],
  },
];

/** Only in test mode: fault injection and reset between test cases. */
export const ADMIN_OPERATIONS: readonly OperationDoc[] = [
  {
    method: 'get',
    path: '/admin/faults',
    summary: 'The faults waiting for the next POST /effects requests.',
    responses: { 200: { description: 'pending faults', schema: faults } },
  },
  {
    method: 'post',
    path: '/admin/faults',
    summary: 'Queue `count` faults of one kind behind those already queued.',
    body: faultSchema,
    responses: { 200: { description: 'pending faults', schema: faults } },
  },
  {
    method: 'delete',
    path: '/admin/faults',
    summary: 'Forget the queued faults.',
    responses: { 200: { description: 'no faults', schema: faults } },
  },
  {
    method: 'post',
    path: '/admin/reset',
    summary: 'Forget effects, journal and queued faults: a fresh stub for the next test case.',
    responses: {
      200: { description: 'reset', schema: z.object({ reset: z.literal(true), totals: Totals }) },
    },
    errors: ['busy'],
  },
];

export function receiverOpenApi(options: { testMode: boolean }): OpenApiDocument {
  return openApiDocument({
    title: 'leasehold receiver',
    version: packageVersion(),
    description:
      "The downstream whose effects must happen once: each job's effect is recorded once, and requests with a token lower than the highest seen are fenced (docs/receiver.md).",
    errorStatus: RECEIVER_ERROR_STATUS,
    operations: [
      ...serviceRoutes(['busy']),
      // In test mode a queued `fail` fault answers POST /effects with the status the test chose.
      ...RECEIVER_OPERATIONS.map((op) =>
        options.testMode && op.method === 'post' && op.path === '/effects'
          ? { ...op, errors: [...(op.errors ?? []), 'injected_fault'] }
          : op,
      ),
      ...(options.testMode ? ADMIN_OPERATIONS : []),
    ],
    components: { Effect, JournalEntry, Totals },
  });
}
