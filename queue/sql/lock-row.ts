// PostgreSQL only: the row lock a holder's fenced write takes before the queue reads its clock.
import { named } from '../../platform/named-sql.js';

/**
 * Invariant: a fenced write judges `now < lease_until` at the moment it writes, not before a wait.
 * A conditional UPDATE that waits for another transaction's row lock decides on a `now` read
 * before the wait, and PostgreSQL re-checks its WHERE clause after the wait only when the row was
 * changed; so the write first takes the row lock here, and the clock is read after it is held.
 * (SQLite needs none: BEGIN IMMEDIATE holds the write lock before the clock is read.)
 */
export const LOCK_ROW = named<{ id: string }>(`SELECT 1 FROM queue_jobs WHERE id = @id FOR UPDATE`);

/**
 * The same for a batch of holders' writes (the batched finish): every row of @ids (a JSON array
 * of strings) locked before the clock is read. In order of id, so two batches sharing rows lock
 * them in the same order and never deadlock; single writes lock one row and cannot close a cycle.
 */
export const LOCK_ROWS = named<{ ids: string }>(
  `SELECT 1 FROM queue_jobs WHERE id IN (SELECT jsonb_array_elements_text(@ids::jsonb)) ORDER BY id FOR UPDATE`,
);

/**
 * The lock and the server's clock in one statement. The clock is read by the outer query's
 * projection of the row the locking subquery returns, and that subquery (which PostgreSQL never
 * flattens, as it locks) returns the row only once the lock is held: `clock_timestamp()`, the
 * time of the call itself, is therefore read after any wait. No row, no reading: the job is
 * unknown, and the caller reads the clock on its own.
 */
export const LOCK_ROW_NOW = named<{ id: string }>(
  `SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now
     FROM (SELECT 1 FROM queue_jobs WHERE id = @id FOR UPDATE) AS locked`,
);

/**
 * LOCK_ROWS and the server's clock in one statement: the rows come out of the locking subquery
 * one at a time, each once it is locked, in order of id, and the clock is read for each as it
 * comes; the latest reading, the last row's, is therefore after every wait. No row, no reading:
 * every job is unknown, and the caller reads the clock on its own.
 */
export const LOCK_ROWS_NOW = named<{ ids: string }>(
  `SELECT max(floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint AS now
     FROM (SELECT 1 FROM queue_jobs WHERE id IN (SELECT jsonb_array_elements_text(@ids::jsonb))
           ORDER BY id FOR UPDATE) AS locked`,
);
