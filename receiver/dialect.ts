// What differs between the receiver's databases, and nothing else: how a write transaction runs
// (and is retried), and which driver errors mean the database cannot take the request for now.
// The SQL is the same on both (receiver/sql/).
import type { Knex } from 'knex';
import type { Executor } from '../platform/sql.js';
import type { ReceiverError } from './errors.js';

export interface EffectDialect {
  /**
   * Runs `work` in one write transaction through knex, retried as a whole on the dialect's
   * transient errors. Its `trx` is what an `apply` callback is handed.
   */
  transaction<T>(knex: Knex, work: (trx: Knex.Transaction) => Promise<T>): Promise<T>;
  /** The same for work that needs no knex transaction; `transaction` when left out. */
  write?<T>(knex: Knex, work: (executor: Executor) => Promise<T>): Promise<T>;
  /**
   * `503 busy` for a driver error meaning the database stayed locked or unreachable after the
   * retries, or is full, read-only or overloaded (the message says which), with that error as
   * `cause`; undefined for any other error.
   */
  unavailable(err: unknown): ReceiverError | undefined;
  /** Closes the database; `knex.destroy()` when left out. */
  close?(knex: Knex): Promise<void>;
}
