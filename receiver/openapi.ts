// The receiver's OpenAPI document: `POST /effects` with the schemas its handler parses
// (middleware.ts), the Fencing-Token header, and its batch form (`?batch`, batch.ts), the reads,
// and the test-mode admin routes when the app has them. A route added to the app and not here
// fails test/receiver/app-openapi.test.ts.
import { z } from 'zod';
import {
  openApiDocument,
  requiresOneOf,
  serviceRoutes,
  type OpenApiDocument,
  type OperationDoc,
} from '../platform/openapi.js';
import { packageVersion } from '../platform/package-version.js';
import { BATCH_HEADER, BATCH_PARAMETER } from './batch.js';
import { RECEIVER_ERROR_STATUS, type ReceiverErrorCode } from './errors.js';
import { faultSchema } from './faults.js';
import { effectQuery, effectsQuery, jobIdParam, journalQuery } from './listings.js';
import { batchEffectSchema, batchEnvelope, effectBodySchema, MAX_BATCH_EFFECTS } from './schemas.js';

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
const Applied = z.object({ outcome: z.literal('applied'), effect: Effect });
const Duplicate = z.object({ outcome: z.literal('duplicate'), effect: Effect });
/** The error body every service renders (the document's `Error`), as one result of a batch carries it. */
const ErrorBody = z.object({
  error: z.looseObject({
    code: z.enum(Object.keys(RECEIVER_ERROR_STATUS) as [ReceiverErrorCode, ...ReceiverErrorCode[]]),
    message: z.string(),
  }),
});
/** One effect of a batch answered as its own POST /effects would have been: status and body. */
const BatchResult = z.union([
  z.object({ status: z.literal(201), body: Applied }),
  z.object({ status: z.literal(200), body: Duplicate }),
  z.object({ status: z.int().min(400).max(599), body: ErrorBody }),
]);
const Fault = z.union([
  z.object({ kind: z.literal('delay'), ms: z.int() }),
  z.object({ kind: z.literal('fail'), status: z.int() }),
  z.object({ kind: z.literal('drop') }),
]);
const faults = z.object({ faults: z.array(Fault) });

/** The header as parseFencingToken reads it: digits, a safe integer >= 1, surrounding spaces allowed. */
const fencingToken = z.string().regex(/^\s*0*[1-9][0-9]{0,15}\s*$/);

/** The handler's refinement, stated in the document: an effect without qty needs a body. */
const QTY_OR_BODY = [['qty'], ['body']] as const;

/**
 * The body in either form. OpenAPI keys an operation by method and path alone (a query string in
 * a path is not allowed), so the batch form is the same operation: `batch` in the query selects
 * it, and the body is then the batch envelope, each effect with its token (batch.ts).
 */
const effectOrBatch = z.union([
  requiresOneOf(effectBodySchema, QTY_OR_BODY),
  batchEnvelope(requiresOneOf(batchEffectSchema, QTY_OR_BODY)),
]);

/** Every answer of POST /effects carries it; the batch itself is docs/downstream-protocol.md's extension. */
const BATCH_OFFER = `the target batches of effects go to (\`/effects?${BATCH_PARAMETER}\`): \`{effects: [{jobId, key?, qty?, body?, token}, ...]}\`, 1 to ${MAX_BATCH_EFFECTS}, answered \`200 {results: [{status, body}, ...]}\` (docs/downstream-protocol.md, batches)`;

const POST_EFFECTS_DESCRIPTION = `Two forms on one operation, told apart by the query.

**A single effect** (no \`${BATCH_PARAMETER}\` in the query): the body \`{jobId, key?, qty?, body?}\` and the \`Fencing-Token\` header (required: 400 without it); answered \`201\` applied, \`200\` duplicate (with \`Idempotent-Replayed: true\`), or an error: \`409 fenced\`, \`422 conflict\`, \`500 apply_failed\`...

**A batch** (\`?${BATCH_PARAMETER}\`, any value, the target named in \`${BATCH_HEADER}\`): the body \`{effects: [{jobId, key?, qty?, body?, token}, ...]}\`, 1 to ${MAX_BATCH_EFFECTS} effects, each a single body with its fencing token as \`token\`; no \`Fencing-Token\` header (ignored if sent). With a secret it is signed with the word \`batch\` in the token's place. The effects are judged in one transaction, each exactly as its own request would be, and the answer is \`200 {results: [{status, body}, ...]}\`, one per effect in the order sent: \`201\` applied, \`200\` duplicate, or an error status with its error body (\`409 fenced\`, \`422 conflict\`, the \`400\` of an effect that is bad on its own, which refuses only itself, \`500 apply_failed\`). A request that is no batch at all is refused as a whole, and nothing is recorded: \`400 invalid_request\` (not JSON, no \`effects\` array of 1 to ${MAX_BATCH_EFFECTS}, an unknown field, over the limits), \`401 invalid_signature\`, \`413\`, \`415\`; a database that stays busy is \`503 busy\` for the whole batch. \`fenced\`, \`conflict\` and \`apply_failed\` never answer a batch as a whole, only effects in its results.`;

export const RECEIVER_OPERATIONS: readonly OperationDoc[] = [
  {
    method: 'post',
    path: '/effects',
    summary:
      "Record an effect once per (jobId, key), under a fencing token: a token lower than the job's highest, by any of its effects, is fenced. With `?batch`, several effects in one request.",
    description: POST_EFFECTS_DESCRIPTION,
    query: z.object({ [BATCH_PARAMETER]: z.string().optional() }),
    headers: {
      'Fencing-Token': {
        schema: fencingToken,
        // Required by a single effect; a batch carries each effect's token in its body instead.
        required: false,
        description:
          "the current lease's token, a safe integer >= 1; required for a single effect (400 without it), not sent with a batch, whose effects carry their own `token`",
      },
      'Leasehold-Signature': {
        schema: z.string(),
        required: false,
        description:
          'a single effect: `t=<epoch ms>,v2=<hex HMAC-SHA256 of "<t>.<token>.<METHOD> <path>.<body>">`; a batch: `t=<epoch ms>,v2=<hex HMAC-SHA256 of "<t>.batch.POST <path>.<body>">`, `<path>` the target as sent (`/effects?batch`); required when the receiver has a secret (docs/receiver.md)',
      },
    },
    body: effectOrBatch,
    responses: {
      201: {
        description: 'a single effect, applied: the first request for the (jobId, key)',
        schema: Applied,
        headers: { [BATCH_HEADER]: BATCH_OFFER },
      },
      200: {
        description:
          "a single effect, duplicate: the same (jobId, key), qty and body again with a token >= the job's highest; nothing added. A batch: one result per effect, in the order sent, each the status and body its own request would have been answered; 200 whatever each effect came to",
        schema: z.union([Duplicate, z.object({ results: z.array(BatchResult) })]),
        headers: {
          'Idempotent-Replayed': '`true` on a single duplicate (not repeated for the results of a batch)',
          [BATCH_HEADER]: BATCH_OFFER,
        },
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
    components: { Effect, JournalEntry, Totals, BatchResult },
  });
}
