// Retrying a whole transaction that the database refused for a transient reason (SQLite's
// SQLITE_BUSY, PostgreSQL's serialization failures and deadlocks): the dialects differ only in
// which errors count.

/**
 * Runs `operation` again while `retryable(error)` holds, with jittered exponential backoff
 * (2 ms doubling to 100 ms), until `budgetMs` is spent; then the last error is thrown. The
 * operation must be a whole transaction, so a retry starts from a clean state.
 */
export async function retryTransaction<T>(
  operation: () => Promise<T>,
  retryable: (err: unknown) => boolean,
  budgetMs: number,
): Promise<T> {
  const started = Date.now();
  let delayMs = 2;
  for (;;) {
    try {
      return await operation();
    } catch (err) {
      if (!retryable(err) || Date.now() - started + delayMs > budgetMs) throw err;
      await new Promise((resolve) => setTimeout(resolve, delayMs * (0.5 + Math.random())));
      delayMs = Math.min(delayMs * 2, 100);
    }
  }
}
