// The one request body POST /effects takes, and its Fencing-Token header, each parsed once at the
// edge into an EffectRequest. Strict: a misspelt field is refused, never silently dropped.
import { z } from 'zod';
import { canonicalBody, effectBody, effectKey } from '../platform/effect-fields.js';
import { jsonDeeperThan, MAX_JSON_DEPTH, parseWith } from '../platform/http-edge.js';
import { idSchema } from '../platform/ids.js';
import { ReceiverError } from './errors.js';
import type { EffectRequest } from './rules.js';

const MAX_TOKEN_TEXT = 40;

/** `Fencing-Token` as a safe integer >= 1; digits only, so "1.0", "1e3" and "+1" are refused. */
export function parseFencingToken(value: string | undefined): number {
  const field = 'Fencing-Token';
  if (value === undefined || value.trim() === '') {
    throw new ReceiverError(
      'invalid_request',
      "The Fencing-Token header is missing; send the current lease's token, an integer >= 1.",
      { field },
    );
  }
  const text = value.trim();
  const shown = JSON.stringify(text.length > MAX_TOKEN_TEXT ? `${text.slice(0, MAX_TOKEN_TEXT)}...` : text);
  if (!/^\d+$/.test(text)) {
    throw new ReceiverError('invalid_request', `The Fencing-Token header must be an integer >= 1, not ${shown}.`, {
      field,
    });
  }
  const token = Number(text);
  if (!Number.isSafeInteger(token)) {
    throw new ReceiverError(
      'invalid_request',
      `The Fencing-Token header must be a safe integer (at most ${Number.MAX_SAFE_INTEGER}), not ${shown}.`,
      { field },
    );
  }
  if (token < 1) {
    throw new ReceiverError(
      'invalid_request',
      `The Fencing-Token header must be >= 1, not ${shown}; tokens start at 1.`,
      { field },
    );
  }
  return token;
}

const QTY_MESSAGE = `qty must be a positive safe integer (1 to ${Number.MAX_SAFE_INTEGER})`;
const BODY_SHAPE = '{"jobId": string, "key"?: string, "qty"?: integer, "body"?: JSON}';
export const effectBodySchema = z
  .strictObject(
    {
      jobId: idSchema('jobId', () => 'jobId is required and must be a string'),
      key: effectKey.optional(),
      qty: z.number({ error: QTY_MESSAGE }).int({ error: QTY_MESSAGE }).positive({ error: QTY_MESSAGE }).optional(),
      body: effectBody.optional(),
    },
    {
      error: (issue) =>
        issue.code === 'unrecognized_keys'
          ? `unknown field ${issue.keys.map((k) => JSON.stringify(k)).join(', ')}; the body has only jobId, key, qty and body`
          : `the body must be a JSON object ${BODY_SHAPE}`,
    },
  )
  .refine((effect) => effect.qty !== undefined || effect.body !== undefined, {
    message: `${QTY_MESSAGE}; it may be left out only when a body is given`,
    path: ['qty'],
  });

/** The body as `{jobId, key?, qty?, body?}`, `body` in its canonical form; any other field is refused. */
export function parseEffectBody(raw: Buffer | undefined): Omit<EffectRequest, 'token'> {
  if (raw === undefined || raw.length === 0) {
    throw new ReceiverError('invalid_request', `The request body is empty; send a JSON object ${BODY_SHAPE}.`);
  }
  let json: unknown;
  try {
    json = JSON.parse(raw.toString('utf8'));
  } catch (err) {
    throw new ReceiverError(
      'invalid_request',
      `The request body is not valid JSON (${(err as Error).message}); send a JSON object.`,
    );
  }
  if (jsonDeeperThan(json, MAX_JSON_DEPTH)) {
    throw new ReceiverError(
      'invalid_request',
      `The request body nests objects and arrays more than ${MAX_JSON_DEPTH} levels deep; send ${BODY_SHAPE}.`,
      { maxDepth: MAX_JSON_DEPTH },
    );
  }
  const { jobId, key, qty, body } = parseWith(effectBodySchema, json, 'request body', ReceiverError.fromEdge);
  return {
    jobId,
    ...(key === undefined ? {} : { key }),
    ...(qty === undefined ? {} : { qty }),
    ...(body === undefined ? {} : { body: canonicalBody(body) }),
  };
}
