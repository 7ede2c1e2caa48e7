// The receiver's listings, a page at a time: GET /effects by jobId and GET /journal by seq, each
// at most `limit` items (default 100, at most 1000) after the cursor `after`, with the cursor of
// the next page as `next`. No answer grows with the tables.
import { z } from 'zod';
import { parseWith } from '../platform/http-edge.js';
import { idSchema } from '../platform/ids.js';
import { ReceiverError } from './errors.js';
import type { PageQuery } from './store.js';

export const DEFAULT_PAGE = 100;
export const MAX_PAGE = 1_000;

const limit = z.coerce
  .number({ error: 'limit must be an integer' })
  .pipe(
    z
      .int({ error: 'limit must be an integer' })
      .min(1, 'limit must be at least 1')
      .max(MAX_PAGE, `limit must be at most ${MAX_PAGE}`),
  )
  .default(DEFAULT_PAGE);

export const effectsQuery = z.strictObject({
  /** The `next` of the page before: effects whose jobId sorts after it. */
  after: idSchema('after').optional(),
  limit,
});

export const journalQuery = z.strictObject({
  /** The `next` of the page before: entries whose seq is greater. */
  after: z.coerce
    .number({ error: 'after must be an integer' })
    .pipe(z.int({ error: 'after must be an integer (a seq)' }).min(0, 'after must be >= 0'))
    .optional(),
  limit,
});

/** A job id in a path, as strict as a job id in a body. */
export const jobIdParam = idSchema('jobId');

export function parseQuery<T extends z.ZodType>(schema: T, query: unknown): z.infer<T> {
  return parseWith(schema, { ...(query as object) }, 'query string', ReceiverError.fromEdge);
}

/**
 * One page of a listing: `read` is asked for one item more than the page holds, which says
 * whether a next page exists without a second query; `next` is the last item's cursor, or null.
 */
export async function readPage<T, Cursor>(
  query: PageQuery<Cursor> & { limit: number },
  read: (page: PageQuery<Cursor>) => Promise<T[]>,
  cursorOf: (item: T) => Cursor,
): Promise<{ items: T[]; next: Cursor | null }> {
  const items = await read({ ...query, limit: query.limit + 1 });
  if (items.length <= query.limit) return { items, next: null };
  const page = items.slice(0, query.limit);
  return { items: page, next: cursorOf(page.at(-1)!) };
}
