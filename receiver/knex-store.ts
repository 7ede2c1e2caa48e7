// The receiver's SQL, on knex, shared by SQLite and PostgreSQL: recording an effect is one
// conditional write whose returned row is the answer, a refusal is explained by reading the row
// afterwards, and rows become Effects and JournalEntries here. Dialects differ only in how a write
// transaction is run (group commit and prepared statements on SQLite, retries on PostgreSQL).
import type { Knex } from 'knex';
import { unavailabilityOf, unavailableMessage } from '../platform/database-errors.js';
import { isPostgresUnavailable } from '../platform/postgres.js';
import { isBusyError } from '../platform/sqlite.js';
import { ReceiverError } from './errors.js';
import {
  judge,
  type Clock,
  type Effect,
  type EffectRequest,
  type JobState,
  type Judgement,
  type Outcome,
} from './rules.js';
import { rowsOf, type Executor, type Row } from '../platform/sql.js';
import type { ApplyEffect, EffectStore, JournalEntry, PageQuery, PruneOptions, Recorded, Totals } from './store.js';

export interface EffectDialect {
  /**
   * Runs `work` in one write transaction through knex, retried as a whole on the dialect's
   * transient errors. Its `trx` is what an `apply` callback is handed.
   */
  transaction<T>(knex: Knex, work: (trx: Knex.Transaction) => Promise<T>): Promise<T>;
  /** The same for work that needs no knex transaction; `transaction` when left out. */
  write?<T>(knex: Knex, work: (executor: Executor) => Promise<T>): Promise<T>;
}

/** An EffectStore on knex; `knex` is its handle, for a caller that listens to its queries. */
export interface KnexEffectStore extends EffectStore<Knex.Transaction> {
  readonly knex: Knex;
}

export interface KnexEffectStoreOptions {
  /** A migrated database (`migrateReceiver`). */
  knex: Knex;
  /** Plain knex transactions, run once, when left out. */
  dialect?: EffectDialect;
}

const EFFECTS = 'receiver_effects';
const JOURNAL = 'receiver_journal';
const EFFECT_COLUMNS = 'job_id, qty, token, applied_at, highest_token';

// Number(): PostgreSQL's driver returns bigint columns as strings; SQLite returns numbers.
const toEffect = (row: Row): Effect => ({
  jobId: String(row.job_id),
  qty: Number(row.qty),
  token: Number(row.token),
  appliedAt: Number(row.applied_at),
});

const toJobState = (row: Row): JobState => ({ effect: toEffect(row), highestToken: Number(row.highest_token) });

const toJournalEntry = (row: Row): JournalEntry => ({
  seq: Number(row.seq),
  jobId: String(row.job_id),
  qty: Number(row.qty),
  token: Number(row.token),
  outcome: row.outcome as Outcome,
  at: Number(row.at),
});

/**
 * The rule (rules.judge) as one conditional write. No row for the job: insert the first effect
 * (`applied`). A row with the same qty and a highest token not above this token: raise the
 * highest token to it (`duplicate`; an equal token writes the value it already has). Anything
 * else updates nothing and returns no row (`fenced` or `conflict`, told apart by the read that
 * follows). `previous_highest_token` is set only by the update, to the value it replaces: NULL in
 * the returned row means this statement inserted it, and otherwise it is the state the duplicate
 * was judged against. On PostgreSQL the statement waits for a concurrent writer of the job and
 * then decides on its committed row, and it locks that row even when it refuses, so requests for
 * one job are serialised from here to their commit, journal entry included.
 */
const RECORD_SQL = `INSERT INTO ${EFFECTS} (job_id, qty, token, applied_at, highest_token)
  VALUES (?, ?, ?, ?, ?)
  ON CONFLICT (job_id) DO UPDATE
    SET highest_token = excluded.highest_token, previous_highest_token = ${EFFECTS}.highest_token
    WHERE ${EFFECTS}.qty = excluded.qty AND ${EFFECTS}.highest_token <= excluded.highest_token
  RETURNING ${EFFECT_COLUMNS}, previous_highest_token`;

const READ_SQL = `SELECT ${EFFECT_COLUMNS} FROM ${EFFECTS} WHERE job_id = ?`;

/**
 * One batch of journal entries judged before a time, oldest first, by the index on `at`. Only
 * the journal: a job's effect row holds its highest token, which is never pruned, or a stale
 * token would pass once its job's row was gone.
 */
const PRUNE_SQL = `DELETE FROM ${JOURNAL} WHERE seq IN (
    SELECT seq FROM ${JOURNAL} WHERE at < ? ORDER BY at LIMIT ?)
  RETURNING seq`;

const DEFAULT_PRUNE_BATCH = 500;

const JOURNAL_SQL = `INSERT INTO ${JOURNAL} (job_id, qty, token, outcome, at) VALUES (?, ?, ?, ?, ?) RETURNING seq`;

const TOTALS = 'receiver_totals';

/**
 * Adds an applied effect to the running totals, unless its qty would take the sum past
 * 2^53 - 1 (bindings: qty, MAX_SAFE_INTEGER - qty): no row back means refused. It is the
 * transaction's last statement, since on PostgreSQL it holds the one totals row until COMMIT and
 * so makes applied effects commit one at a time.
 */
const ADD_TOTALS_SQL = `UPDATE ${TOTALS} SET effects = effects + 1, qty = qty + ? WHERE id = 1 AND qty <= ? RETURNING qty`;

/**
 * Judges and records one request on `executor`, inside a write transaction: the conditional
 * write, `apply` for an applied effect, then the journal entry. Every outcome is named by
 * `judge`, given the state the write proved was there, so SQL and rule cannot silently part.
 */
async function recordIn(
  executor: Executor,
  request: EffectRequest,
  now: number,
  apply?: (effect: Effect) => Promise<void>,
): Promise<Recorded> {
  const first = judge(undefined, request, now);
  const { effect, highestToken } = first.state;
  const written = rowsOf(
    await executor.raw(RECORD_SQL, [effect.jobId, effect.qty, effect.token, effect.appliedAt, highestToken]),
  )[0];
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

/**
 * The applied effect counted in the totals, or a 400 that rolls the whole transaction back (the
 * effect, `apply`'s writes and the journal entry): a sum past 2^53 - 1 could not be reported exactly.
 */
async function addToTotals(executor: Executor, request: EffectRequest): Promise<void> {
  const added = rowsOf(await executor.raw(ADD_TOTALS_SQL, [request.qty, Number.MAX_SAFE_INTEGER - request.qty]));
  if (added.length > 0) return;
  const row = rowsOf(await executor.raw(`SELECT qty FROM ${TOTALS} WHERE id = 1`, []))[0];
  if (!row) throw new Error(`The receiver's ${TOTALS} table has no row; the database was changed by hand.`);
  throw new ReceiverError(
    'invalid_request',
    `The effect for job "${request.jobId}" was not applied: its qty ${request.qty} would take the sum of applied quantities (${String(row.qty)}) past ${Number.MAX_SAFE_INTEGER}, which could not be reported exactly.`,
    { jobId: request.jobId, qty: request.qty, totalQty: Number(row.qty) },
  );
}

/** Reads the row after a refused write, only to say why: `fenced` or `conflict`. */
async function explainRefusal(executor: Executor, request: EffectRequest, now: number): Promise<Judgement> {
  const row = rowsOf(await executor.raw(READ_SQL, [request.jobId]))[0];
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

async function appendJournal(executor: Executor, entry: Omit<JournalEntry, 'seq'>): Promise<JournalEntry> {
  const row = rowsOf(
    await executor.raw(JOURNAL_SQL, [entry.jobId, entry.qty, entry.token, entry.outcome, entry.at]),
  )[0];
  return { seq: Number(row?.seq), ...entry };
}

/**
 * `503 busy` for a driver error meaning the database stayed locked or unreachable after the
 * retries, or is full, read-only or overloaded (the message says which), with that error as
 * `cause`; undefined for any other error. Both drivers are known here, so a store built
 * without a dialect still answers `busy`.
 */
function unavailable(err: unknown): ReceiverError | undefined {
  const condition = unavailabilityOf(err);
  if (condition)
    return new ReceiverError('busy', unavailableMessage(condition, 'receiver'), {}, undefined, { cause: err });
  if (isBusyError(err)) {
    return new ReceiverError(
      'busy',
      'The receiver database stayed locked by another writer; retry the request shortly.',
      {},
      undefined,
      { cause: err },
    );
  }
  if (isPostgresUnavailable(err)) {
    return new ReceiverError(
      'busy',
      'The receiver could not reach its PostgreSQL database, or kept conflicting with other writers; retry the request shortly.',
      {},
      undefined,
      { cause: err },
    );
  }
  return undefined;
}

/**
 * Where every method ends on failure. It runs outside the dialect's retries and group commit,
 * so those still see the driver's own errors.
 */
function rethrow(err: unknown): never {
  throw unavailable(err) ?? err;
}

const plainTransactions: EffectDialect = { transaction: (knex, work) => knex.transaction(work) };

/** An EffectStore over a migrated knex handle (SQLite 3.35+ or PostgreSQL). */
export function createKnexEffectStore(options: KnexEffectStoreOptions): KnexEffectStore {
  const { knex } = options;
  const dialect = options.dialect ?? plainTransactions;
  const write = <T>(work: (executor: Executor) => Promise<T>): Promise<T> =>
    dialect.write ? dialect.write(knex, work) : dialect.transaction(knex, work);

  return {
    knex,

    record(request: EffectRequest, clock: Clock, apply?: ApplyEffect<Knex.Transaction>): Promise<Recorded> {
      // The clock is read inside the transaction, so `appliedAt` and journal times follow the
      // order in which requests were serialised. `apply` writes through knex, so only a request
      // that has one needs a knex transaction; the others take the dialect's leaner write path.
      const recorded = apply
        ? dialect.transaction(knex, (trx) => recordIn(trx, request, clock.now(), (effect) => apply(effect, trx)))
        : write((executor) => recordIn(executor, request, clock.now()));
      return recorded.catch(rethrow);
    },

    async listEffects(page: PageQuery<string> = {}) {
      const query = knex(EFFECTS).select(EFFECT_COLUMNS.split(', ')).orderBy('job_id');
      if (page.after !== undefined) query.where('job_id', '>', page.after);
      if (page.limit !== undefined) query.limit(page.limit);
      const rows = await query.catch(rethrow);
      return (rows as Row[]).map(toEffect);
    },

    async getEffect(jobId) {
      const row = (await knex(EFFECTS)
        .select(EFFECT_COLUMNS.split(', '))
        .where({ job_id: jobId })
        .first()
        .catch(rethrow)) as Row | undefined;
      return row && toEffect(row);
    },

    async totals(): Promise<Totals> {
      // One row, kept by every applied effect (ADD_TOTALS_SQL) and never past 2^53 - 1.
      const row = (await knex(TOTALS).select('effects', 'qty').where({ id: 1 }).first().catch(rethrow)) as
        { effects: number | string; qty: number | string } | undefined;
      return { effects: Number(row?.effects ?? 0), qty: Number(row?.qty ?? 0) };
    },

    async journal(page: PageQuery<number> = {}) {
      const query = knex(JOURNAL).select('seq', 'job_id', 'qty', 'token', 'outcome', 'at').orderBy('seq');
      if (page.after !== undefined) query.where('seq', '>', page.after);
      if (page.limit !== undefined) query.limit(page.limit);
      const rows = await query.catch(rethrow);
      return (rows as Row[]).map(toJournalEntry);
    },

    async pruneJournal(olderThan: number, options: PruneOptions = {}): Promise<number> {
      const batchSize = options.batchSize ?? DEFAULT_PRUNE_BATCH;
      if (!Number.isSafeInteger(batchSize) || batchSize < 1) {
        throw new RangeError(`batchSize must be a positive integer, not ${String(batchSize)}.`);
      }
      // Each batch is its own short write transaction, so recording requests wait for one batch
      // at most, never for the whole prune.
      let pruned = 0;
      while (!options.signal?.aborted) {
        const deleted = await write(
          async (executor) => rowsOf(await executor.raw(PRUNE_SQL, [olderThan, batchSize])).length,
        ).catch(rethrow);
        pruned += deleted;
        if (deleted < batchSize) break;
      }
      return pruned;
    },

    async reset() {
      await write(async (executor) => {
        await executor.raw(`DELETE FROM ${JOURNAL}`, []);
        await executor.raw(`DELETE FROM ${EFFECTS}`, []);
        await executor.raw(`UPDATE ${TOTALS} SET effects = 0, qty = 0 WHERE id = 1`, []);
      }).catch(rethrow);
    },

    close: () => knex.destroy(),
  };
}
