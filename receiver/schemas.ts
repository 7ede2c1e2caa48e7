// The one request body POST /effects takes, and its Fencing-Token header, each parsed once at the
// edge into an EffectRequest. Strict: a misspelt field is refused, never silently dropped.
import { z } from 'zod';
import { canonicalBody, effectBody, effectKey } from '../platform/effect-fields.js';
import {
  hasProtoKey,
  jsonDeeperThan,
  jsonKeyCount,
  MAX_JSON_DEPTH,
  MAX_JSON_KEYS,
  parseWith,
} from '../platform/http-edge.js';
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
const TOKEN_MESSAGE = `token must be a safe integer >= 1 (1 to ${Number.MAX_SAFE_INTEGER}), the fencing token of the lease the effect is sent under`;

/** The effect's own fields, as a single request's body has them and a batch's effect with its token. */
const effectFields = {
  jobId: idSchema('jobId', () => 'jobId is required and must be a string'),
  key: effectKey.optional(),
  qty: z.number({ error: QTY_MESSAGE }).int({ error: QTY_MESSAGE }).positive({ error: QTY_MESSAGE }).optional(),
  body: effectBody.optional(),
};

const qtyOrBody = {
  message: `${QTY_MESSAGE}; it may be left out only when a body is given`,
  path: ['qty'],
};

export const effectBodySchema = z
  .strictObject(effectFields, {
    error: (issue) =>
      issue.code === 'unrecognized_keys'
        ? `unknown field ${issue.keys.map((k) => JSON.stringify(k)).join(', ')}; the body has only jobId, key, qty and body`
        : `the body must be a JSON object ${BODY_SHAPE}`,
  })
  .refine((effect) => effect.qty !== undefined || effect.body !== undefined, qtyOrBody);

/** The most effects one batch carries. */
export const MAX_BATCH_EFFECTS = 100;

const ITEM_SHAPE = '{"jobId": string, "key"?: string, "qty"?: integer, "body"?: JSON, "token": integer}';

/** One effect of a batch: a single request's body with the Fencing-Token beside it, as `token`. */
export const batchEffectSchema = z
  .strictObject(
    { ...effectFields, token: z.number({ error: TOKEN_MESSAGE }).int({ error: TOKEN_MESSAGE }).min(1, TOKEN_MESSAGE) },
    {
      error: (issue) =>
        issue.code === 'unrecognized_keys'
          ? `unknown field ${issue.keys.map((k) => JSON.stringify(k)).join(', ')}; an effect of a batch has only jobId, key, qty, body and token`
          : `an effect of a batch must be a JSON object ${ITEM_SHAPE}`,
    },
  )
  .refine((effect) => effect.qty !== undefined || effect.body !== undefined, qtyOrBody);

const BATCH_SHAPE = `{"effects": [${ITEM_SHAPE}, ...]}`;

/**
 * A batch's envelope, `{effects: [item, ...]}` with 1 to MAX_BATCH_EFFECTS items: the route's with
 * `z.unknown()` items, each parsed on its own by batchEffectSchema so one bad effect refuses only
 * itself; the OpenAPI document's with batchEffectSchema items, saying what each must be.
 */
export function batchEnvelope<Item extends z.ZodType>(item: Item) {
  return z.strictObject(
    {
      effects: z
        .array(item, { error: `effects must be an array of 1 to ${MAX_BATCH_EFFECTS} effects` })
        .min(1, `effects must hold at least 1 effect`)
        .max(MAX_BATCH_EFFECTS, `effects must hold at most ${MAX_BATCH_EFFECTS} effects`),
    },
    {
      error: (issue) =>
        issue.code === 'unrecognized_keys'
          ? `unknown field ${issue.keys.map((k) => JSON.stringify(k)).join(', ')}; a batch has only effects`
          : `the body must be a JSON object ${BATCH_SHAPE}`,
    },
  );
}

/** A batch's envelope as the route parses it; each effect in it is parsed on its own. */
export const batchBodySchema = batchEnvelope(z.unknown());

/**
 * The raw body as JSON, held to the edge's limits before any schema sees it: not empty, at most
 * MAX_JSON_KEYS object keys (counted in the bytes, before the parse), valid JSON, at most
 * MAX_JSON_DEPTH deep, and no `__proto__` key, which the schemas' copies would silently drop.
 */
function parseJson(raw: Buffer | undefined, shape: string): unknown {
  if (raw === undefined || raw.length === 0) {
    throw new ReceiverError('invalid_request', `The request body is empty; send a JSON object ${shape}.`);
  }
  const keys = jsonKeyCount(raw);
  if (keys > MAX_JSON_KEYS) {
    throw new ReceiverError(
      'invalid_request',
      `The request body holds ${keys} object keys, more than ${MAX_JSON_KEYS}; send fewer keys (an array of values costs less than an object of many keys).`,
      { maxKeys: MAX_JSON_KEYS },
    );
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
      `The request body nests objects and arrays more than ${MAX_JSON_DEPTH} levels deep; send ${shape}.`,
      { maxDepth: MAX_JSON_DEPTH },
    );
  }
  if (hasProtoKey(json)) {
    throw new ReceiverError(
      'invalid_request',
      'The request body has an object key "__proto__", which cannot be kept as sent (JavaScript reads it as the prototype); rename the key.',
    );
  }
  return json;
}

/** The parsed fields as an EffectRequest's, `body` in its canonical form. */
function fieldsOf(parsed: z.infer<typeof effectBodySchema>): Omit<EffectRequest, 'token'> {
  const { jobId, key, qty, body } = parsed;
  return {
    jobId,
    ...(key === undefined ? {} : { key }),
    ...(qty === undefined ? {} : { qty }),
    ...(body === undefined ? {} : { body: canonicalBody(body) }),
  };
}

/** The body as `{jobId, key?, qty?, body?}`, `body` in its canonical form; any other field is refused. */
export function parseEffectBody(raw: Buffer | undefined): Omit<EffectRequest, 'token'> {
  const json = parseJson(raw, BODY_SHAPE);
  return fieldsOf(parseWith(effectBodySchema, json, 'request body', ReceiverError.fromEdge));
}

/**
 * A batch's body: each effect an EffectRequest, or the 400 that effect alone would be answered
 * with. A body that is no batch at all (not JSON, over the limits, no `effects` array of 1 to
 * MAX_BATCH_EFFECTS) is refused as a whole.
 */
export function parseBatchBody(raw: Buffer | undefined): Array<EffectRequest | ReceiverError> {
  const json = parseJson(raw, BATCH_SHAPE);
  const { effects } = parseWith(batchBodySchema, json, 'request body', ReceiverError.fromEdge);
  return effects.map((item) => {
    try {
      const parsed = parseWith(batchEffectSchema, item, 'request body', ReceiverError.fromEdge);
      return { ...fieldsOf(parsed), token: parsed.token };
    } catch (err) {
      if (err instanceof ReceiverError) return err;
      throw err;
    }
  });
}
