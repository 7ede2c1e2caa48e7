// Write transactions held open for as long as a test needs: on a second connection, as another
// process would hold a SQLite file's write lock, so the queue's writes wait; or on a store's own
// connection, so its reads can be seen to wait for the COMMIT, or not.
import { onTestFinished } from 'vitest';
import { openSqlite, type SqliteDatabase, type SqliteExecutor } from '../../platform/sqlite.js';

export interface HeldWrite {
  /** Lets the transaction COMMIT, and resolves once it has. */
  end(): Promise<void>;
  /** Whether the COMMIT is done. */
  committed(): boolean;
}

/**
 * Begins a write transaction on `db` (BEGIN IMMEDIATE), runs `work` in it, and keeps it open
 * until end() is called; resolves once `work` has run, the transaction still open.
 */
export async function holdWrite(
  db: SqliteDatabase,
  work: (executor: SqliteExecutor) => Promise<unknown> = async () => undefined,
): Promise<HeldWrite> {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let opened!: () => void;
  const isOpen = new Promise<void>((resolve) => (opened = resolve));
  let committed = false;
  const done = db
    .write(async (executor) => {
      await work(executor);
      opened();
      await released;
    })
    .then(() => {
      committed = true;
    });
  // A `work` that fails rolls the transaction back: its error, rather than waiting forever.
  await Promise.race([isOpen, done]);
  return {
    end: async () => {
      release();
      await done;
    },
    committed: () => committed,
  };
}

/**
 * Another connection on `filename` takes the write lock (BEGIN IMMEDIATE, as a second process
 * would) and keeps it until the returned release() is called, or the test ends.
 */
export async function holdWriteLock(filename: string): Promise<() => Promise<void>> {
  const holder = openSqlite({ filename, busyTimeoutMs: 1_000 });
  const held = await holdWrite(holder);
  let open = true;
  const releaseLock = async () => {
    if (!open) return;
    open = false;
    await held.end();
    await holder.close();
  };
  onTestFinished(releaseLock);
  return releaseLock;
}
