// What differs between the queue's databases, and nothing else: how a write transaction runs and
// where its `now` comes from, how migrations are serialised, which driver errors mean the
// database is unavailable, and how claimable jobs are heard of. Statements that differ keep their
// variants side by side in queue/sql/, chosen by `sql`.
import type { Knex } from 'knex';
import type { GroupCommitStats } from '../platform/group-commit.js';
import type { Executor } from '../platform/sql.js';
import type { ClaimableSignal } from './claimable.js';
import type { QueueError } from './errors.js';
import type { SqlDialect } from './sql/dialects.js';

export interface Dialect {
  /** Which variant of a statement that differs (queue/sql/) this database takes. */
  readonly sql: SqlDialect;
  /**
   * Runs `work` in one short write transaction, handing it the queue's `now` read inside it, once
   * the transaction holds what it writes: the write lock (SQLite), or the rows of the jobs `lock`
   * names (PostgreSQL, for a holder's fenced write: one id, or a batch's ids), so no lock wait
   * comes between `now` and the write.
   */
  write<T>(knex: Knex, work: (trx: Executor, now: number) => Promise<T>, lock?: string | readonly string[]): Promise<T>;
  /**
   * Runs `work`, a write of one statement that needs no lock before its clock (a claim): `now` is
   * null when the statement reads the queue's clock itself (PostgreSQL's server clock, in the
   * statement), else the queue's now as `write` hands it. On PostgreSQL the statement is its own
   * transaction; on SQLite it shares `write`'s.
   */
  writeStatement<T>(knex: Knex, work: (executor: Executor, now: number | null) => Promise<T>): Promise<T>;
  /**
   * The channel an enqueue NOTIFYs in its own statement, so other processes hear of the job when
   * it commits, without a round trip of its own (PostgreSQL); undefined where no other process listens.
   */
  readonly notifyChannel?: string;
  /**
   * Where lease checks (`verify`) read; the store's knex when left out. SQLite in WAL gives a
   * connection that reads beside the writer's open transaction and sees what committed before the
   * read began. PostgreSQL's pool reads beside its writes already.
   */
  readonly reads?: Knex;
  /** The queue's clock, read on the executor (the database server's clock on PostgreSQL). */
  now(executor: Executor): Promise<number>;
  /** True when the queue's clock is the database server's, which a read can take in its own statement. */
  readonly serverClock: boolean;
  /** Runs migrations; dialects serialise concurrent starts their own way. */
  migrate(knex: Knex): Promise<void>;
  /**
   * The store's answer for a driver error meaning the database stayed busy or unreachable
   * after `write`'s retries, or is full or read-only: a `queue_unavailable` QueueError with the
   * driver's error as its `cause`. Undefined for any other error.
   */
  unavailable(err: unknown): QueueError | undefined;
  /**
   * How this store hears that a job may have become claimable. Default: its own commits only;
   * PostgreSQL also hears other processes' (LISTEN/NOTIFY).
   */
  claimableSignal?(knex: Knex): ClaimableSignal;
  /** Transactions and the writes they carried, where writes share transactions (group commit). */
  commitStats?(): GroupCommitStats;
  /** Closes the database; `knex.destroy()` when left out. */
  close?(knex: Knex): Promise<void>;
}
