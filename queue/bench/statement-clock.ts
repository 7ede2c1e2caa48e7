// Time spent inside the sqlite3 driver per statement kind: wraps a driver connection's `run`,
// `all` and `exec` (the only calls knex and the benchmark make), so what is left of a cycle's
// wall time is knex and JavaScript.
import type { Knex } from 'knex';

export interface KindTotal {
  calls: number;
  ms: number;
}

/** Which step of the cycle a statement is; a COMMIT is named after the step it commits. */
export function kindOf(sql: string, previous: string): string {
  const s = sql.trim().toUpperCase();
  if (s.startsWith('BEGIN')) return 'BEGIN IMMEDIATE';
  if (s.startsWith('COMMIT')) return previous.startsWith('claim') ? 'COMMIT (claim)' : previous.startsWith('finish') ? 'COMMIT (finish)' : 'COMMIT';
  if (s.startsWith('ROLLBACK')) return 'ROLLBACK';
  if (s.includes("SET STATUS = 'DEAD'")) return 'quarantine UPDATE';
  if (s.includes("SET STATUS = 'LEASED'")) return 'claim UPDATE ... RETURNING';
  if (s.includes("SET STATUS = 'DONE'")) return 'finish UPDATE ... RETURNING';
  if (s.startsWith('UPDATE')) return 'UPDATE';
  if (s.startsWith('SELECT')) return 'SELECT';
  return 'other';
}

export class StatementClock {
  totals = new Map<string, KindTotal>();
  /** While true, statements are not recorded (e.g. the benchmark's own top-ups). */
  paused = false;
  private previous = '';

  reset(): void {
    this.totals = new Map();
    this.previous = '';
  }

  record(sql: string, ms: number): void {
    if (this.paused) return;
    const kind = kindOf(sql, this.previous);
    this.previous = kind;
    const total = this.totals.get(kind) ?? { calls: 0, ms: 0 };
    total.calls++;
    total.ms += ms;
    this.totals.set(kind, total);
  }

  driverMs(): number {
    let sum = 0;
    for (const t of this.totals.values()) sum += t.ms;
    return sum;
  }

  statements(): number {
    let sum = 0;
    for (const t of this.totals.values()) sum += t.calls;
    return sum;
  }

  /** Wraps the methods of one driver connection (sqlite3.Database) in place. */
  wrap(conn: Record<string, unknown>): void {
    for (const method of ['run', 'all', 'exec'] as const) {
      const original = conn[method] as (...args: unknown[]) => unknown;
      const clock = this;
      conn[method] = function (this: unknown, sql: string, ...rest: unknown[]) {
        const callback = rest.pop() as (this: unknown, ...results: unknown[]) => void;
        const started = performance.now();
        return original.call(this, sql, ...rest, function (this: unknown, ...results: unknown[]) {
          clock.record(sql, performance.now() - started);
          callback.apply(this, results);
        });
      };
    }
  }

  /** Wraps the single pooled connection of a knex handle opened by queue/sqlite.ts (pool max 1). */
  async wrapKnex(knex: Knex): Promise<void> {
    const conn = (await knex.client.acquireConnection()) as Record<string, unknown>;
    try {
      this.wrap(conn);
    } finally {
      knex.client.releaseConnection(conn);
    }
  }
}
