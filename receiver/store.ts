// The receiver's storage port. The HTTP app and fencedEffects speak only to this interface;
// SQLite (embedded default) and PostgreSQL implement it with the same SQL and the same rule.
import type { Clock, Effect, EffectRequest, Judgement, Outcome } from './rules.js';

/** One judged request, in the order the receiver judged it: its fields as given, and the outcome. */
export interface JournalEntry {
  seq: number;
  jobId: string;
  /** Absent for the job's default effect. */
  key?: string;
  qty?: number;
  body?: unknown;
  token: number;
  outcome: Outcome;
  at: number;
}

export interface Totals {
  /** How many effects were applied. */
  effects: number;
  /** The sum of the applied quantities, of the effects that were given one. */
  qty: number;
}

/**
 * Runs for an `applied` outcome inside the recording transaction; throwing rolls it back. What
 * it throws reaches the store's retries as it is, so a transient driver error reruns the whole
 * transaction (judgement and `apply` with it), like one from the store's own statements.
 */
export type ApplyEffect<Tx> = (effect: Effect, tx: Tx) => Promise<void>;

export interface PruneOptions {
  /** Entries deleted per write transaction (default 500), so no prune holds the write lock long. */
  batchSize?: number;
  /** Stops the prune between batches (a closing service); what was deleted stays deleted. */
  signal?: AbortSignal;
}

/** One page of a listing: up to `limit` items after the cursor `after` (both optional). */
export interface PageQuery<Cursor> {
  after?: Cursor;
  limit?: number;
}

/**
 * Where a listing of effects resumes: after this effect. Effects sort by jobId, and within a job
 * the default effect first, then by key; a cursor without `key` is the job's default effect.
 */
export interface EffectCursor {
  jobId: string;
  key?: string;
}

/** A page of effects: all jobs', or only `jobId`'s; `after` a jobId alone means its default effect. */
export interface EffectPageQuery extends PageQuery<string | EffectCursor> {
  jobId?: string;
}

export interface Recorded {
  judgement: Judgement;
  journal: JournalEntry;
}

/**
 * Storage for effects and the journal. `Tx` is the transaction handle `apply` is given. A
 * database that stays locked or unreachable past the store's retries is `ReceiverError('busy')`,
 * with the driver's error as `cause`.
 */
export interface EffectStore<Tx = unknown> {
  /**
   * Judges `request` (rules.judge) against the state of its `(jobId, key)` and its job's highest
   * token, and records the outcome and its journal entry in one write transaction, so racing
   * requests for one effect give one `applied` at most, the fence holds across a job's keys, and
   * the journal replays through the rules. The clock is read inside the
   * transaction. `apply` runs only for `applied`, inside it; the transaction may run again
   * after a transient failure, `apply` included.
   */
  record(request: EffectRequest, clock: Clock, apply?: ApplyEffect<Tx>): Promise<Recorded>;
  /**
   * Judges and records several requests in ONE write transaction, each as `record` would have
   * alone, and resolves to their records in the order given. A job's requests are judged in the
   * order given, each seeing the ones before it (their tokens, their effects); the jobs among
   * themselves in the order of their ids, so batches that share jobs take their rows in one order.
   * All share one clock reading. A failure of any one (`apply` throwing, the totals refusing an
   * effect, the database) rolls all of them back and rejects as `record` would. Optional: a store
   * without it serves single requests only, and fencedEffects then offers no batches.
   */
  recordMany?(requests: readonly EffectRequest[], clock: Clock, apply?: ApplyEffect<Tx>): Promise<Recorded[]>;
  /**
   * Effects by jobId and key (the default effect first): all of them, or one page (`limit` of
   * them after the effect `after`), of every job or of `jobId` alone.
   */
  listEffects(page?: EffectPageQuery): Promise<Effect[]>;
  /** The effect recorded for `(jobId, key)`; `key` left out is the job's default effect. */
  getEffect(jobId: string, key?: string): Promise<Effect | undefined>;
  /** The applied effects and the sum of their quantities, always a safe integer (an effect that would break it is refused). */
  totals(): Promise<Totals>;
  /** Entries by seq: all of them, or one page (`limit` of them after the seq `after`). */
  journal(page?: PageQuery<number>): Promise<JournalEntry[]>;
  /**
   * Deletes journal entries judged before `olderThan` (epoch ms), a batch per short write
   * transaction, and resolves to how many it deleted. Effects, and with them each job's highest
   * token, are never pruned: forgetting a job's highest token would let a stale token through.
   */
  pruneJournal(olderThan: number, options?: PruneOptions): Promise<number>;
  /** Forgets every effect and journal entry (test stubs between cases). */
  reset(): Promise<void>;
  close(): Promise<void>;
}

/** Judges and records one request: `store.record`, as a function for callers that hold a store. */
export function recordEffect<Tx>(
  store: EffectStore<Tx>,
  request: EffectRequest,
  clock: Clock,
  apply?: ApplyEffect<Tx>,
): Promise<Recorded> {
  return store.record(request, clock, apply);
}
