// The running totals: one row holding how many effects were applied and the sum of their qty.
import { named } from '../../platform/named-sql.js';
import { rowsOf, type Executor } from '../../platform/sql.js';
import { ReceiverError } from '../errors.js';
import type { EffectRequest } from '../rules.js';
import { TOTALS } from './rows.js';

/**
 * Invariant: the sum never passes 2^53 - 1, so `/totals` is always exact. Adds an applied effect
 * unless its qty would take the sum past it (`room` = MAX_SAFE_INTEGER - qty): no row back means
 * refused. It is the transaction's last statement, since on PostgreSQL it holds the one totals
 * row until COMMIT and so makes applied effects commit one at a time.
 */
const ADD = named<{ count: number; qty: number; room: number }>(
  `UPDATE ${TOTALS} SET effects = effects + @count, qty = qty + @qty WHERE id = 1 AND qty <= @room RETURNING qty`,
);

const READ_QTY = `SELECT qty FROM ${TOTALS} WHERE id = 1`;

/**
 * The applied effect counted in the totals, or a 400 that rolls the whole transaction back (the
 * effect, `apply`'s writes and the journal entry): a sum past 2^53 - 1 could not be reported exactly.
 * An effect given no qty counts as an effect and adds nothing to the sum.
 */
export async function addToTotals(executor: Executor, request: EffectRequest): Promise<void> {
  const qty = request.qty ?? 0;
  if (await add(executor, 1, qty)) return;
  throw new ReceiverError(
    'invalid_request',
    `The effect for job "${request.jobId}" was not applied: its qty ${qty} would take the sum of applied quantities (${await totalQty(executor)}) past ${Number.MAX_SAFE_INTEGER}, the largest sum GET /totals can report exactly. Send it with a smaller qty.`,
    { jobId: request.jobId, qty, totalQty: await totalQty(executor) },
  );
}

/**
 * The applied effects of a batch counted in one statement, or the 400 that rolls the whole batch
 * back when their qty together would take the sum past 2^53 - 1 (each alone may still fit).
 */
export async function addAllToTotals(executor: Executor, requests: readonly EffectRequest[]): Promise<void> {
  if (requests.length === 0) return;
  const qty = requests.reduce((sum, request) => sum + (request.qty ?? 0), 0);
  if (Number.isSafeInteger(qty) && (await add(executor, requests.length, qty))) return;
  throw new ReceiverError(
    'invalid_request',
    `The batch's ${requests.length} applied effects were not applied: their qty together (${qty}) would take the sum of applied quantities (${await totalQty(executor)}) past ${Number.MAX_SAFE_INTEGER}, the largest sum GET /totals can report exactly. Send them one at a time, or with smaller qty.`,
    { qty, totalQty: await totalQty(executor) },
  );
}

/** Adds `count` effects and `qty` unless the sum would pass 2^53 - 1; false when refused. */
async function add(executor: Executor, count: number, qty: number): Promise<boolean> {
  const added = rowsOf(await executor.raw(ADD.sql, ADD.bind({ count, qty, room: Number.MAX_SAFE_INTEGER - qty })));
  return added.length > 0;
}

async function totalQty(executor: Executor): Promise<number> {
  const row = rowsOf(await executor.raw(READ_QTY, []))[0];
  if (!row) throw new Error(`The receiver's ${TOTALS} table has no row; the database was changed by hand.`);
  return Number(row.qty);
}
