// Why a database could not take a request for now, read from a driver's error code, in one place
// for both stores of both services: each turns it into its 503 with a sentence that says which
// condition it is, so an operator knows whether to wait, free disk space or fix permissions. Reads
// go on meanwhile, and nothing is cached: the next request after the condition clears succeeds.
import { CommitQueueFull } from './group-commit.js';

/**
 * Beyond a busy or unreachable database, which each store tells by its dialect's own rules:
 * - `full`: no disk space left, or SQLite's size limit reached.
 * - `read_only`: a read-only file or mount, or a read-only server (a standby).
 * - `io`: the disk or the server failed to read or write.
 * - `overloaded`: more writes waiting for a transaction than the store takes.
 */
export type Unavailability = 'full' | 'read_only' | 'io' | 'overloaded';

const SQLITE: Record<string, Unavailability> = {
  SQLITE_FULL: 'full',
  SQLITE_READONLY: 'read_only',
  SQLITE_IOERR: 'io',
  SQLITE_NOMEM: 'io',
};

const POSTGRES: Record<string, Unavailability> = {
  '53100': 'full', // disk_full
  '25006': 'read_only', // read_only_sql_transaction: a standby, or default_transaction_read_only
  '53200': 'io', // out_of_memory
  '58030': 'io', // io_error
};

/** The condition a driver error (or the group commit's refusal) reports; undefined for any other error. */
export function unavailabilityOf(err: unknown): Unavailability | undefined {
  if (err instanceof CommitQueueFull) return 'overloaded';
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code !== 'string') return undefined;
  return Object.hasOwn(SQLITE, code) ? SQLITE[code] : Object.hasOwn(POSTGRES, code) ? POSTGRES[code] : undefined;
}

/** The 503's sentence for `kind` on `service`'s database, saying what is refused and what to do. */
export function unavailableMessage(kind: Unavailability, service: 'queue' | 'receiver'): string {
  switch (kind) {
    case 'full':
      return `The ${service}'s database is full (no disk space left, or its size limit reached): writes are refused until space is freed, reads still work. Retry once it has room.`;
    case 'read_only':
      return `The ${service}'s database is read-only (file permissions, a read-only mount, or a read-only server): writes are refused, reads still work. Retry once it is writable again.`;
    case 'io':
      return `The ${service}'s database failed to read or write (an I/O or memory error); retry shortly, and check its disk or server if this persists.`;
    case 'overloaded':
      return `The ${service} has more writes waiting for its database than it takes (${CommitQueueFull.DEFAULT_MAX} by default); it sheds this one rather than grow without bound. Retry shortly.`;
  }
}

/** Why a service cannot start on its database, in words for one line, when the error says so. */
export function startFailureOfDatabase(err: unknown): string | undefined {
  switch (startCodeOf(err)) {
    case 'SQLITE_NOTADB':
    case 'SQLITE_CORRUPT':
      return 'the file --db names is not a SQLite database, or is damaged; point --db at a leasehold database or a new file';
    case 'SQLITE_READONLY':
    case '25006':
      return 'the database is read-only (file permissions, a read-only mount, or a read-only server), and starting needs to write to it; make it writable or pick another with --db';
    case 'SQLITE_FULL':
    case '53100':
      return 'the database is full (no disk space left); free some space, or pick another place with --db';
    case 'SQLITE_IOERR':
      return `the database could not be read or written (${messageOf(err)}); check its disk`;
    case 'ENOTDIR':
    case 'EEXIST':
      if ((err as { syscall?: unknown }).syscall === 'mkdir') {
        return `--db names a path under a file, not a folder (${messageOf(err)}); pick a path whose folders are folders`;
      }
  }
  return undefined;
}

/**
 * The driver's code of a start-up failure. knex's migrator turns a failure to take its lock into
 * an error named MigrationLocked that keeps only the driver's message, so there the code is read
 * from the message: at start-up no caller's text can be in it.
 */
function startCodeOf(err: unknown): unknown {
  const e = err as { code?: unknown; name?: unknown; message?: unknown } | null;
  if (e?.code !== undefined || e?.name !== 'MigrationLocked') return e?.code;
  const message = String(e.message);
  if (/read-only transaction/.test(message)) return '25006';
  return /\b(SQLITE_[A-Z]+)\b/.exec(message)?.[1];
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message.replace(/\s*\n\s*/g, ' ') : String(err);
}
