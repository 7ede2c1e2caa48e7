// The receiver's listings, a page at a time: GET /effects by jobId and key and GET /journal by
// seq, each at most `limit` items (default 100, at most 1000) after the cursor `after`, with the
// cursor of the next page as `next`. No answer grows with the tables.
import { z } from 'zod';
import { effectKey } from '../platform/effect-fields.js';
import { parseQueryWith } from '../platform/http-edge.js';
import { idProblem, idSchema, MAX_KEY_LENGTH } from '../platform/ids.js';
import { onlyParameters, queryInteger } from '../platform/query-params.js';
import { ReceiverError } from './errors.js';
import type { Effect } from './rules.js';
import type { EffectCursor } from './store.js';

export const DEFAULT_PAGE = 100;
export const MAX_PAGE = 1_000;

const limit = queryInteger('limit')
  .pipe(
    z
      .int({ error: 'limit must be an integer' })
      .min(1, 'limit must be at least 1')
      .max(MAX_PAGE, `limit must be at most ${MAX_PAGE}`),
  )
  .default(DEFAULT_PAGE);

/**
 * An effect listing's cursor as text: the jobId for a default effect, `<jobId>NUL<key>` for a
 * keyed one. Neither may hold a NUL, so the text names one effect, and a jobId alone (every
 * cursor before keys existed) still reads as it did.
 */
export function effectCursorText(effect: Pick<Effect, 'jobId' | 'key'>): string {
  return effect.key === undefined ? effect.jobId : `${effect.jobId}\0${effect.key}`;
}

const effectCursor = z.string({ error: 'after must be a string' }).transform((text, ctx): EffectCursor => {
  const split = text.indexOf('\0');
  const jobId = split < 0 ? text : text.slice(0, split);
  const key = split < 0 ? undefined : text.slice(split + 1);
  const problem =
    idProblem(jobId, 'after (its jobId)') ??
    (key === undefined ? undefined : idProblem(key, 'after (its key)', MAX_KEY_LENGTH));
  if (problem === undefined) return key === undefined ? { jobId } : { jobId, key };
  ctx.issues.push({ code: 'custom', message: `${problem}; pass the \`next\` of the page before`, input: text });
  return z.NEVER;
});

export const effectsQuery = z.strictObject(
  {
    /** Only this job's effects: its default effect first, then by key. */
    jobId: idSchema('jobId').optional(),
    /** The `next` of the page before: effects that sort after it (by jobId, then key). */
    after: effectCursor.optional(),
    limit,
  },
  onlyParameters('GET /effects', 'jobId, after and limit'),
);

/** `GET /effects/:jobId?key=`: the keyed effect, or the default effect when `key` is left out. */
export const effectQuery = z.strictObject({ key: effectKey.optional() }, onlyParameters('GET /effects/:jobId', 'key'));

export const journalQuery = z.strictObject(
  {
    /** The `next` of the page before: entries whose seq is greater. */
    after: queryInteger('after')
      .pipe(z.int({ error: 'after must be an integer (a seq)' }).min(0, 'after must be >= 0'))
      .optional(),
    limit,
  },
  onlyParameters('GET /journal', 'after and limit'),
);

/** A job id in a path, as strict as a job id in a body. */
export const jobIdParam = idSchema('jobId');

export function parseQuery<T extends z.ZodType>(schema: T, query: unknown): z.infer<T> {
  return parseQueryWith(schema, query, ReceiverError.fromEdge);
}

/**
 * One page of a listing: `read` is asked for one item more than the page holds, which says
 * whether a next page exists without a second query; `next` is the last item's cursor, or null.
 */
export async function readPage<T, Query extends { limit: number }, Next>(
  query: Query,
  read: (page: Query) => Promise<T[]>,
  cursorOf: (item: T) => Next,
): Promise<{ items: T[]; next: Next | null }> {
  const items = await read({ ...query, limit: query.limit + 1 });
  if (items.length <= query.limit) return { items, next: null };
  const page = items.slice(0, query.limit);
  return { items: page, next: cursorOf(page.at(-1)!) };
}
