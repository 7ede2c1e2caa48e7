// Retrying what failed for a transient reason, with jittered exponential backoff: a whole
// transaction the database refused (SQLite's SQLITE_BUSY, PostgreSQL's serialization failures and
// deadlocks), or a send that found the gateway, the queue or a downstream out of reach.
import { setTimeout as sleep } from 'node:timers/promises';

export interface RetryOptions {
  /** How long, from the first attempt, a retry may still start; then the last error is thrown. */
  budgetMs: number;
  /** The first wait (default 2 ms), doubling up to `maxDelayMs` (default 100 ms), each jittered ±50 %. */
  firstDelayMs?: number;
  maxDelayMs?: number;
  /** Aborting it ends a wait at once, rejecting with an `AbortError` whose `cause` is the signal's reason. */
  signal?: AbortSignal | undefined;
}

/** Runs `operation` again while `retryable(error)` holds and the budget lasts. */
export async function retryWhile<T>(
  operation: () => Promise<T>,
  retryable: (err: unknown) => boolean,
  options: RetryOptions,
): Promise<T> {
  const started = Date.now();
  let delayMs = options.firstDelayMs ?? 2;
  const maxDelayMs = options.maxDelayMs ?? 100;
  for (;;) {
    try {
      return await operation();
    } catch (err) {
      if (!retryable(err) || Date.now() - started + delayMs > options.budgetMs) throw err;
      await sleep(delayMs * (0.5 + Math.random()), undefined, options.signal ? { signal: options.signal } : undefined);
      delayMs = Math.min(delayMs * 2, maxDelayMs);
    }
  }
}

/**
 * Runs `operation` again while `retryable(error)` holds, from 2 ms doubling to 100 ms, until
 * `budgetMs` is spent. The operation must be a whole transaction, so a retry starts from a clean
 * state.
 */
export function retryTransaction<T>(
  operation: () => Promise<T>,
  retryable: (err: unknown) => boolean,
  budgetMs: number,
): Promise<T> {
  return retryWhile(operation, retryable, { budgetMs });
}
