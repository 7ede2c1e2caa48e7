// The bare `sqlite3` driver with the queue's settings (rollback journal or WAL, synchronous=FULL,
// busy timeout), promisified and nothing more: the floor that knex and the store build on; and
// the commit counters SQLite keeps in its files, read from outside.
import { open } from 'node:fs/promises';
import os from 'node:os';
import sqlite3 from 'sqlite3';

export type Row = Record<string, unknown>;

export interface BareDb {
  /** The driver's connection, for instrumentation. */
  readonly handle: sqlite3.Database;
  run(sql: string, bindings?: readonly unknown[]): Promise<{ changes: number }>;
  all(sql: string, bindings?: readonly unknown[]): Promise<Row[]>;
  exec(sql: string): Promise<void>;
  close(): Promise<void>;
}

/** The pragmas platform/sqlite.ts sets on every connection. */
export function queuePragmas(journal: 'delete' | 'wal' = 'delete'): string {
  return `PRAGMA journal_mode = ${journal === 'wal' ? 'WAL' : 'DELETE'}; PRAGMA synchronous = FULL; PRAGMA busy_timeout = 5000;`;
}

export async function openBare(filename: string, journal: 'delete' | 'wal' = 'delete'): Promise<BareDb> {
  const db = await new Promise<sqlite3.Database>((resolve, reject) => {
    const handle = new sqlite3.Database(filename, (err) => (err ? reject(err) : resolve(handle)));
  });
  const bare: BareDb = {
    handle: db,
    run: (sql, bindings = []) =>
      new Promise((resolve, reject) =>
        db.run(sql, bindings, function (this: sqlite3.RunResult, err: Error | null) {
          if (err) reject(err);
          else resolve({ changes: this.changes });
        }),
      ),
    all: (sql, bindings = []) =>
      new Promise((resolve, reject) => db.all<Row>(sql, bindings, (err, rows) => (err ? reject(err) : resolve(rows)))),
    exec: (sql) => new Promise((resolve, reject) => db.exec(sql, (err) => (err ? reject(err) : resolve()))),
    close: () => new Promise((resolve, reject) => db.close((err) => (err ? reject(err) : resolve()))),
  };
  await bare.exec(queuePragmas(journal));
  return bare;
}

/**
 * SQLite's file change counter (header bytes 24..27): in rollback-journal mode it goes up by
 * one with every committed write transaction, from any process — one per durable commit.
 * Transactions that change nothing write nothing and do not count.
 */
export async function changeCounter(filename: string): Promise<number> {
  const file = await open(filename, 'r');
  try {
    const buf = Buffer.alloc(4);
    const { bytesRead } = await file.read(buf, 0, 4, 24);
    return bytesRead === 4 ? buf.readUInt32BE(0) : 0;
  } finally {
    await file.close();
  }
}

/**
 * In WAL mode the header's counter stays put; the WAL index (`-shm`, bytes 8..11 of its header,
 * in the machine's byte order) counts every commit instead (`iChange`), from any process. Null
 * while no connection has the file open (no `-shm`).
 */
export async function walCommitCounter(filename: string): Promise<number | null> {
  let file;
  try {
    file = await open(`${filename}-shm`, 'r');
  } catch {
    return null;
  }
  try {
    const buf = Buffer.alloc(4);
    const { bytesRead } = await file.read(buf, 0, 4, 8);
    return bytesRead === 4 ? (os.endianness() === 'LE' ? buf.readUInt32LE(0) : buf.readUInt32BE(0)) : null;
  } finally {
    await file.close();
  }
}

export const SQLITE_VERSION = sqlite3.VERSION;
