// A second connection that holds a SQLite file's write lock, as another process would, so a
// test can keep the queue's writes waiting for as long as it needs.
import { onTestFinished } from 'vitest';
import { openSqlite, type SqliteJournal } from '../../platform/sqlite.js';

/**
 * Another connection on `filename` takes the write lock (BEGIN IMMEDIATE, as a second process
 * would) and keeps it until the returned release() is called, or the test ends. `journal` must be
 * the file's own: a connection opening it sets its journal mode.
 */
export async function holdWriteLock(filename: string, journal: SqliteJournal = 'delete'): Promise<() => Promise<void>> {
  const holder = openSqlite({ filename, busyTimeoutMs: 1_000, journal });
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let locked!: () => void;
  const isLocked = new Promise<void>((resolve) => (locked = resolve));
  const done = holder.write(async () => {
    locked();
    await released;
  });
  await isLocked;
  let open = true;
  const releaseLock = async () => {
    if (!open) return;
    open = false;
    release();
    await done;
    await holder.close();
  };
  onTestFinished(releaseLock);
  return releaseLock;
}
