// The receiver's store interface, and `recordEffect`, which applies the pure rules inside one
// store transaction. A new store (PostgreSQL next to SQLite) implements EffectStore only;
// rules and HTTP stay untouched.
import { judge, type Clock, type Effect, type EffectRequest, type JobState, type Judgement, type Outcome } from './rules.js';

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
 * Storage for effects and the journal. Write operations take the transaction handle `Tx`
 * that `transaction()` hands out, so the read, the decision and the writes share it.
 * A database that stays locked or unreachable past the store's retries is `ReceiverError('busy')`
 * from `transaction()` and the reads; the `tx` methods let the driver's errors through, so that
 * `transaction()` can tell which ones to retry.
 */
export interface EffectStore<Tx = unknown> {
  /**
   * Runs `work` in one write transaction that excludes every other writer of the same job
   * from the first read to the commit (SQLite: BEGIN IMMEDIATE; PostgreSQL: a row or advisory
   * lock). May run `work` again after a transient lock failure, so `work` must only write
   * through `tx`.
   */
  transaction<T>(work: (tx: Tx) => Promise<T>): Promise<T>;
  readJob(tx: Tx, jobId: string): Promise<JobState | undefined>;
  /**
   * Writes `next` for a job that had `previous` when it was read. The write is conditional on
   * the row still being `previous` (inserting when there was none); false when it was not.
   */
  writeJob(tx: Tx, previous: JobState | undefined, next: JobState): Promise<boolean>;
  appendJournal(tx: Tx, entry: Omit<JournalEntry, 'seq'>): Promise<JournalEntry>;

  listEffects(): Promise<Effect[]>;
  getEffect(jobId: string): Promise<Effect | undefined>;
  totals(): Promise<Totals>;
  journal(): Promise<JournalEntry[]>;
  /** Forgets every effect and journal entry (test stubs between cases). */
  reset(): Promise<void>;
  close(): Promise<void>;
}

/**
 * Runs for an `applied` outcome inside the recording transaction; throwing rolls it back. What
 * it throws reaches `transaction()` as it is, so a transient driver error reruns the whole
 * transaction (and `apply` with it), like one from the store's own statements.
 */
export type ApplyEffect<Tx> = (effect: Effect, tx: Tx) => Promise<void>;

export interface Recorded {
  judgement: Judgement;
  journal: JournalEntry;
}

/**
 * Judges `request` against the job's stored state and records the result, all in one store
 * transaction: racing requests for one job therefore see each other's writes, and give one
 * `applied` at most. The clock is read inside the transaction so `appliedAt` and journal
 * times follow the order in which requests were serialised.
 */
export async function recordEffect<Tx>(
  store: EffectStore<Tx>,
  request: EffectRequest,
  clock: Clock,
  apply?: ApplyEffect<Tx>,
): Promise<Recorded> {
  return store.transaction(async (tx) => {
    const previous = await store.readJob(tx, request.jobId);
    const now = clock.now();
    const judgement = judge(previous, request, now);
    if (judgement.changed && !(await store.writeJob(tx, previous, judgement.state))) {
      // Only a store whose transaction() does not exclude other writers can get here.
      throw new Error(`The row of job "${request.jobId}" changed inside its transaction; the store does not isolate writers.`);
    }
    if (judgement.outcome === 'applied' && apply) await apply(judgement.state.effect, tx);
    const journal = await store.appendJournal(tx, { ...request, outcome: judgement.outcome, at: now });
    return { judgement, journal };
  });
}
