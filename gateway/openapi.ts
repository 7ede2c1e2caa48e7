// The gateway's OpenAPI document: `POST /send` with the schema its handler parses
// (schemas.ts), its answers and error codes, beside the routes every service has. A route
// added to the app and not here fails test/gateway/app-openapi.test.ts.
import { z } from 'zod';
import { openApiDocument, serviceRoutes, type OpenApiDocument, type OperationDoc } from '../platform/openapi.js';
import { packageVersion } from '../platform/package-version.js';
import { GATEWAY_ERROR_STATUS } from './errors.js';
import { sendBody, sendsBody } from './schemas.js';

const Effect = z.object({
  jobId: z.string(),
  key: z.string().nullable().optional().describe("the effect's key; null or absent for the job's default effect"),
  qty: z.int().nullable().optional(),
  body: z.json().optional().describe('the body recorded with the effect, when one was given'),
  token: z.int(),
  appliedAt: z.int(),
});

export const GATEWAY_OPERATIONS: readonly OperationDoc[] = [
  {
    method: 'post',
    path: '/send',
    summary:
      "Forward one of a job's effects to a downstream (`to`, default `receiver`) under the caller's lease: verified with the queue, stamped with the verified token, retried on downstream failures.",
    body: sendBody,
    responses: {
      200: {
        description: 'the downstream applied the effect, or recognised a duplicate (nothing added)',
        schema: z.object({ outcome: z.enum(['applied', 'duplicate']), effect: Effect }),
        headers: {
          'Leasehold-Attempts': 'how many attempts the forwarding took',
          'Idempotent-Replayed': '`true` on a duplicate',
        },
      },
    },
    errors: [
      'unknown_downstream',
      'stale_lease',
      'unknown_job',
      'fenced',
      'conflict',
      'qty_mismatch',
      'upstream_unavailable',
      'upstream_rejected',
      'bad_downstream',
      'queue_unavailable',
    ],
  },
  {
    method: 'post',
    path: '/sends',
    summary:
      'Several sends in one request (1–100), each judged exactly as its own `POST /send` would be; their lease checks and forwards share requests. A bad send refuses the whole request (400) and nothing is forwarded.',
    body: sendsBody,
    responses: {
      200: {
        description:
          'one result per send, in the order sent: the status `POST /send` would have answered, its attempts, and its body (`{outcome, effect}` or `{error}`); 200 whatever each send came to',
        schema: z.object({
          results: z.array(
            z.object({
              status: z.int(),
              attempts: z.int(),
              body: z.union([
                z.object({ outcome: z.enum(['applied', 'duplicate']), effect: Effect }),
                z.object({ error: z.object({ code: z.string(), message: z.string() }).loose() }),
              ]),
            }),
          ),
        }),
      },
    },
    errors: [],
  },
];

export function gatewayOpenApi(options: { apiKey: boolean }): OpenApiDocument {
  return openApiDocument({
    title: 'leasehold gateway',
    version: packageVersion(),
    description:
      "The fencing gateway: a worker's effect is forwarded only while its lease is current, stamped with the verified fencing token (docs/gateway.md).",
    errorStatus: GATEWAY_ERROR_STATUS,
    operations: [...serviceRoutes(), ...GATEWAY_OPERATIONS],
    components: { Effect },
    bearer: options.apiKey,
  });
}
