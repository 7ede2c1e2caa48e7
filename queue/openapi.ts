// The queue's OpenAPI document: each route with the schema its handler parses (schemas.ts),
// its answers and its error codes. A route added to the app and not here fails
// test/queue/app-openapi.test.ts, which walks the app's router.
import { z } from 'zod';
import { openApiDocument, serviceRoutes, type OpenApiDocument, type OperationDoc } from '../platform/openapi.js';
import { packageVersion } from '../platform/package-version.js';
import { QUEUE_ERROR_STATUS } from './errors.js';
import {
  cancelBody,
  claimBody,
  enqueueBody,
  failBody,
  finishBody,
  finishesBody,
  heartbeatBody,
  jobIdParam,
  listQuery,
  releaseBody,
  retryBody,
  verificationsBody,
  verifyBody,
} from './schemas.js';

const epochMs = z.int().min(0);
const Job = z.object({
  id: z.string(),
  qty: z.int(),
  payload: z.json(),
  status: z.enum(['pending', 'leased', 'done', 'dead']),
  owner: z.string().nullable(),
  token: z.int(),
  attempts: z.int(),
  maxAttempts: z.int(),
  priority: z.int(),
  leaseMs: z.int().nullable(),
  leaseUntil: epochMs.nullable(),
  deadline: epochMs.nullable(),
  runAt: epochMs,
  result: z.json(),
  lastError: z.string().nullable(),
  deadReason: z.enum(['attempts_exhausted', 'deadline_passed', 'cancelled']).nullable(),
  createdAt: epochMs,
  updatedAt: epochMs,
});
const Lease = z.object({
  id: z.string(),
  qty: z.int(),
  payload: z.json(),
  owner: z.string(),
  token: z.int().min(1),
  attempt: z.int().min(1),
  leaseUntil: epochMs,
  deadline: epochMs.nullable(),
});
const Stats = z.object({ pending: z.int(), leased: z.int(), done: z.int(), dead: z.int() });
const ErrorBody = z.object({ error: z.looseObject({ code: z.string(), message: z.string() }) });
/** An entry of a batch's answer refused on its own: the error body, with the status it would have had. */
const BatchErrorBody = z.object({
  error: z.looseObject({ code: z.string(), message: z.string(), status: z.int() }),
});

const id = { id: jobIdParam };
const job = z.object({ job: Job });
const lease = z.object({ lease: Lease });
const FENCED = ['stale_lease', 'unknown_job', 'queue_unavailable'];

/** The queue's own operations; the routes every service has come from `serviceRoutes`. */
export const QUEUE_OPERATIONS: readonly OperationDoc[] = [
  {
    method: 'post',
    path: '/jobs',
    summary: 'Enqueue a job; the same id with the same body again answers the job as it is (200).',
    body: enqueueBody,
    responses: {
      201: { description: 'enqueued', schema: job },
      200: { description: 'the same enqueue again', schema: job },
    },
    errors: ['job_exists', 'queue_unavailable'],
  },
  {
    method: 'post',
    path: '/claims',
    summary: 'Claim the next claimable job (or up to `max`), waiting up to `waitMs` for one.',
    body: claimBody,
    responses: {
      200: {
        description: '`{lease}`, or `{leases}` when `max` was given',
        schema: z.union([lease, z.object({ leases: z.array(Lease) })]),
      },
      204: { description: 'nothing became claimable within `waitMs`' },
    },
    errors: ['queue_unavailable', 'too_many_waiters'],
  },
  {
    method: 'post',
    path: '/jobs/:id/heartbeat',
    summary: 'Renew the lease; fenced by owner and token.',
    params: id,
    body: heartbeatBody,
    responses: { 200: { description: 'renewed', schema: lease } },
    errors: FENCED,
  },
  {
    method: 'post',
    path: '/jobs/:id/finish',
    summary: 'Finish the job (done); with `next`, claim the next job in the same transaction.',
    params: id,
    body: finishBody,
    responses: {
      200: {
        description: '`{job}`, or `{job, next}` when `next` was asked for',
        schema: z.union([job, z.object({ job: Job, next: Lease.nullable() })]),
      },
    },
    errors: FENCED,
  },
  {
    method: 'post',
    path: '/finishes',
    summary:
      'Several finishes of one owner in one transaction: each answer the job or the error its own finish would give; with `next`, up to one lease per accepted finish.',
    body: finishesBody,
    responses: {
      200: {
        description:
          'one result per finish, in order, an error carrying its `status` (409 or 404); `next` only when asked for',
        schema: z.object({
          results: z.array(z.union([job, BatchErrorBody])),
          next: z.array(Lease).optional(),
        }),
      },
    },
    errors: ['queue_unavailable'],
  },
  {
    method: 'post',
    path: '/jobs/:id/fail',
    summary: 'Fail the attempt: back to pending at `runAt`, or dead when attempts are spent.',
    params: id,
    body: failBody,
    responses: { 200: { description: 'failed', schema: job } },
    errors: FENCED,
  },
  {
    method: 'post',
    path: '/jobs/:id/verify',
    summary: 'Check, without changing anything, that the lease is current.',
    params: id,
    body: verifyBody,
    responses: { 200: { description: 'current', schema: lease } },
    errors: FENCED,
  },
  {
    method: 'post',
    path: '/jobs/:id/release',
    summary: 'Hand the job back unworked: pending and claimable now, the attempt given back.',
    params: id,
    body: releaseBody,
    responses: { 200: { description: 'released', schema: job } },
    errors: FENCED,
  },
  {
    method: 'post',
    path: '/jobs/:id/cancel',
    summary: 'Cancel a pending or leased job: dead, `deadReason: "cancelled"`.',
    params: id,
    body: cancelBody,
    responses: { 200: { description: 'cancelled (or already dead)', schema: job } },
    errors: ['job_finished', 'unknown_job', 'queue_unavailable'],
  },
  {
    method: 'post',
    path: '/jobs/:id/retry',
    summary: 'A dead job back to pending with attempts 0; its token keeps counting up.',
    params: id,
    body: retryBody,
    responses: { 200: { description: 'pending again', schema: job } },
    errors: ['not_dead', 'deadline_passed', 'unknown_job', 'queue_unavailable'],
  },
  {
    method: 'post',
    path: '/verifications',
    summary: 'Several lease checks read by one statement: each answer a lease or the error `verify` would give.',
    body: verificationsBody,
    responses: {
      200: {
        description: 'one result per lease asked for, in order',
        schema: z.object({ results: z.array(z.union([lease, ErrorBody])) }),
      },
    },
    errors: ['queue_unavailable'],
  },
  {
    method: 'get',
    path: '/jobs/:id',
    summary: 'One job.',
    params: id,
    responses: { 200: { description: 'the job', schema: job } },
    errors: ['unknown_job', 'queue_unavailable'],
  },
  {
    method: 'get',
    path: '/jobs',
    summary:
      'Jobs in order of enqueue: at most `limit`, fewer when their payloads, results and errors pass 16 MiB; page on with `after` set to `next`. With `lean=true`, jobs without payload, result and lastError.',
    query: listQuery,
    responses: {
      200: {
        description: 'a page of jobs, and `next`: the `after` of the page that follows, null after the last',
        schema: z.object({
          jobs: z.array(z.union([Job, Job.omit({ payload: true, result: true, lastError: true })])),
          next: z.string().nullable(),
        }),
      },
    },
    errors: ['queue_unavailable'],
  },
  {
    method: 'get',
    path: '/stats',
    summary: 'How many jobs are in each status, zeros included.',
    responses: { 200: { description: 'counts', schema: Stats } },
    errors: ['queue_unavailable'],
  },
  {
    method: 'get',
    path: '/ui',
    summary: 'The live page: leases and refusals as they happen (no data of its own; it reads /ui/state).',
    responses: { 200: { description: 'an HTML page', mediaType: 'text/html' } },
    open: true,
  },
  {
    method: 'get',
    path: '/ui/state',
    summary: "What the live page shows: the queue's recent leases, refusals and counts.",
    responses: { 200: { description: 'the live state', schema: z.looseObject({}) } },
    errors: ['queue_unavailable'],
  },
];

export function queueOpenApi(options: { apiKey: boolean }): OpenApiDocument {
  return openApiDocument({
    title: 'leasehold queue',
    version: packageVersion(),
    description:
      'A job queue with fenced leases: every heartbeat, finish, fail and verify is checked against the current owner and token (docs/queue.md).',
    errorStatus: QUEUE_ERROR_STATUS,
    operations: [...serviceRoutes(['queue_unavailable']), ...QUEUE_OPERATIONS],
    components: { Job, Lease, Stats },
    bearer: options.apiKey,
  });
}
