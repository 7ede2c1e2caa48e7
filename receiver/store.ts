// The receiver's storage port. The HTTP app and fencedEffects speak only to this interface;
// SQLite (embedded default) and PostgreSQL implement it with the same SQL and the same rule.
import type { Clock, Effect, EffectRequest, Judgement, Outcome } from './rules.js';

/** One judged request, in the order the receiver judged it. */
export interface JournalEntry {
  seq: number;
  jobId: string;
  qty: number;
  token: number;
  outcome: Outcome;
  at: number;
}

export interface Totals {
  /** How many effects were applied. */
  effects: number;
  /** The sum of the applied quantities. */
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
   * Judges `request` (rules.judge) against the job's stored state and records the outcome and
   * its journal entry in one write transaction, so racing requests for one job give one
   * `applied` at most and the journal replays through the rules. The clock is read inside the
   * transaction. `apply` runs only for `applied`, inside it; the transaction may run again
   * after a transient failure, `apply` included.
   */
  record(request: EffectRequest, clock: Clock, apply?: ApplyEffect<Tx>): Promise<Recorded>;
  /** Effects by jobId: all of them, or one page (`limit` of them after the jobId `after`). */
  listEffects(page?: PageQuery<string>): Promise<Effect[]>;
  getEffect(jobId: string): Promise<Effect | undefined>;
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
