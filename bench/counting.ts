// Round trips as a process sees them: every statement handed to a database driver (each one a
// hop to the driver's thread or socket and back), PostgreSQL COMMITs, and HTTP requests its
// servers received. Installed in the benchmark process for the in-process columns, and in each
// service through count-preload.ts.
import { subscribe } from 'node:diagnostics_channel';
import { createRequire } from 'node:module';

export interface ProcessCounts {
  /** Statements executed through sqlite3 (Statement run/all/get/each, Database exec) or pg (Client query). */
  statements: number;
  /** COMMITs sent to PostgreSQL: its write transactions, as this process sees them. */
  pgCommits: number;
  /** HTTP requests this process's servers received. */
  requests: number;
  /** SQLite write transactions ended (COMMIT or ROLLBACK answered), and their summed time from BEGIN sent to that answer. */
  sqliteTransactions: number;
  sqliteTransactionMs: number;
  /** CPU time this process has used, user and system, in ms. */
  cpuMs: number;
}

const counts = { statements: 0, pgCommits: 0, requests: 0, sqliteTransactions: 0, sqliteTransactionMs: 0 };
/** When the SQLite transaction open now was begun (a service writes on one connection at a time). */
let sqliteBegunAt: number | undefined;
let installed = false;

export function processCounts(): ProcessCounts {
  const cpu = process.cpuUsage();
  return { ...counts, cpuMs: (cpu.user + cpu.system) / 1000 };
}

/** Wraps the drivers' methods in place and listens for incoming requests; idempotent. */
export function installCounters(): void {
  if (installed) return;
  installed = true;
  const require = createRequire(import.meta.url);
  const sqlite3 = require('sqlite3') as {
    Statement: { prototype: Record<string, unknown> };
    Database: { prototype: Record<string, unknown> };
  };
  // Database#run/all/get/each make a Statement and call its method: counted there, once. A
  // write transaction's BEGIN and COMMIT come through run or all, and are timed there too.
  for (const method of ['run', 'all']) {
    wrap(sqlite3.Statement.prototype, method, (args, statement) => {
      timeTransaction(statement, args);
      return 1;
    });
  }
  for (const method of ['get', 'each']) wrap(sqlite3.Statement.prototype, method, () => 1);
  wrap(sqlite3.Database.prototype, 'exec', () => 1);
  const pg = require('pg') as { Client: { prototype: Record<string, unknown> } };
  wrap(pg.Client.prototype, 'query', (args) => {
    const first = args[0] as string | { text?: string } | undefined;
    const text = typeof first === 'string' ? first : (first?.text ?? '');
    if (/^\s*COMMIT\b/i.test(text)) counts.pgCommits++;
    return 1;
  });
  subscribe('http.server.request.start', () => counts.requests++);
}

/**
 * A write transaction's time, from its BEGIN sent to its COMMIT's (or ROLLBACK's) answer: notes
 * when a BEGIN is sent, and wraps the callback of a COMMIT or ROLLBACK in `args`, in place.
 */
function timeTransaction(statement: unknown, args: unknown[]): void {
  const sql = (statement as { sql?: unknown }).sql;
  if (typeof sql !== 'string') return;
  if (/^\s*BEGIN\b/i.test(sql)) sqliteBegunAt = performance.now();
  const last = args.length - 1;
  const callback = args[last];
  if (!/^\s*(COMMIT|ROLLBACK)\b/i.test(sql) || typeof callback !== 'function') return;
  args[last] = function (this: unknown, ...results: unknown[]) {
    if (sqliteBegunAt !== undefined) {
      counts.sqliteTransactions++;
      counts.sqliteTransactionMs += performance.now() - sqliteBegunAt;
      sqliteBegunAt = undefined;
    }
    return (callback as (...a: unknown[]) => unknown).apply(this, results);
  };
}

/** Replaces `method` with one that adds `weigh(args, this)` statements, then calls it as it was. */
function wrap(
  target: Record<string, unknown>,
  method: string,
  weigh: (args: unknown[], self: unknown) => number,
): void {
  const original = target[method] as ((...args: unknown[]) => unknown) | undefined;
  if (typeof original !== 'function') return;
  target[method] = function (this: unknown, ...args: unknown[]) {
    counts.statements += weigh(args, this);
    return original.apply(this, args);
  };
}

/** The line a service prints on stdout when asked for its counts (SIGUSR2). */
export const COUNTS_LINE = 'leasehold-bench-counts ';
