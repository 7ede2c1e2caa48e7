// Recording one judged request: the rule (rules.judge) as one conditional write, `apply` for an
// applied effect, the journal entry, and the applied effect added to the totals, all on the
// executor of one write transaction. Every outcome is named by `judge`, given the state the
// write proved was there, so SQL and rule cannot silently part.
import { named } from '../../platform/named-sql.js';
import { rowsOf, type Executor } from '../../platform/sql.js';
import { judge, type Effect, type EffectRequest, type Judgement, type Outcome } from '../rules.js';
import type { Recorded } from '../store.js';
import { appendJournal } from './journal.js';
import { EFFECT_COLUMNS, EFFECTS, toEffect, toJobState } from './rows.js';
import { addToTotals } from './totals.js';

/**
 * Invariant: per job, one effect is ever inserted, and its highest token only rises, and only
 * for the same qty. No row for the job: insert the first effect (`applied`). A row with the same
 * qty and a highest token not above this token: raise the highest token to it (`duplicate`; an
 * equal token writes the value it already has). Anything else updates nothing and returns no
 * row (`fenced` or `conflict`, told apart by the read that follows). `previous_highest_token` is
 * set only by the update, to the value it replaces: NULL in the returned row means this
 * statement inserted it, and otherwise it is the state the duplicate was judged against. On
 * PostgreSQL the statement waits for a concurrent writer of the job and then decides on its
 * committed row, and it locks that row even when it refuses, so requests for one job are
 * serialised from here to their commit, journal entry included.
 */
const RECORD = named<{ jobId: string; qty: number; token: number; appliedAt: number; highestToken: number }>(
  `INSERT INTO ${EFFECTS} (job_id, qty, token, applied_at, highest_token)
  VALUES (@jobId, @qty, @token, @appliedAt, @highestToken)
  ON CONFLICT (job_id) DO UPDATE
    SET highest_token = excluded.highest_token, previous_highest_token = ${EFFECTS}.highest_token
    WHERE ${EFFECTS}.qty = excluded.qty AND ${EFFECTS}.highest_token <= excluded.highest_token
  RETURNING ${EFFECT_COLUMNS}, previous_highest_token`,
);

/** The job's row, read only after a refused write to say why. */
const READ = named<{ jobId: string }>(`SELECT ${EFFECT_COLUMNS} FROM ${EFFECTS} WHERE job_id = @jobId`);

/**
 * Judges and records one request on `executor`, inside a write transaction: the conditional
 * write, `apply` for an applied effect, then the journal entry and the totals.
 */
export async function recordIn(
  executor: Executor,
  request: EffectRequest,
  now: number,
  apply?: (effect: Effect) => Promise<void>,
): Promise<Recorded> {
  const first = judge(undefined, request, now);
  const { effect, highestToken } = first.state;
  const written = rowsOf(await executor.raw(RECORD.sql, RECORD.bind({ ...effect, highestToken })))[0];
  let judgement: Judgement;
  if (!written) {
    judgement = await explainRefusal(executor, request, now);
  } else if (written.previous_highest_token === null || written.previous_highest_token === undefined) {
    judgement = first;
  } else {
    const before = { effect: toEffect(written), highestToken: Number(written.previous_highest_token) };
    judgement = asAllowed(judge(before, request, now), ['duplicate'], request);
  }
  if (judgement.outcome === 'applied' && apply) await apply(judgement.state.effect);
  const journal = await appendJournal(executor, { ...request, outcome: judgement.outcome, at: now });
  if (judgement.outcome === 'applied') await addToTotals(executor, request);
  return { judgement, journal };
}

/** Reads the row after a refused write, only to say why: `fenced` or `conflict`. */
async function explainRefusal(executor: Executor, request: EffectRequest, now: number): Promise<Judgement> {
  const row = rowsOf(await executor.raw(READ.sql, READ.bind({ jobId: request.jobId })))[0];
  return asAllowed(judge(row && toJobState(row), request, now), ['fenced', 'conflict'], request);
}

/** The rule's outcome, when it is one the write allows; otherwise the SQL and the rule disagree. */
function asAllowed(judgement: Judgement, allowed: readonly Outcome[], request: EffectRequest): Judgement {
  if (allowed.includes(judgement.outcome)) return judgement;
  // Rows are only deleted by reset(), so this means a reset ran meanwhile, or a bug.
  throw new Error(
    `Recording job "${request.jobId}" found the rules answering "${judgement.outcome}" where the database allowed ${allowed.join(' or ')}; nothing was recorded.`,
  );
}
