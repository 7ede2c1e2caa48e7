// Time spent inside the sqlite3 driver per statement kind: wraps a driver connection's `run`,
// `all` and `exec`, and the `run` and `all` of every statement it prepares, so what is left of
// a cycle's wall time is knex and JavaScript.
export interface KindTotal {
  calls: number;
  ms: number;
}

/** Which step of the cycle a statement is; a COMMIT is named after the step it commits. */
export function kindOf(sql: string, previous: string): string {
  const s = sql.trim().toUpperCase();
  if (s.startsWith('BEGIN')) return 'BEGIN IMMEDIATE';
  if (s.startsWith('COMMIT'))
    return previous.startsWith('claim')
      ? 'COMMIT (claim)'
      : previous.startsWith('finish')
        ? 'COMMIT (finish)'
        : 'COMMIT';
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
    for (const method of ['run', 'all', 'exec'] as const) this.timeCalls(conn, method, (args) => args[0] as string);
    const prepare = conn.prepare as (...args: unknown[]) => Record<string, unknown>;
    const timeStatement = (statement: Record<string, unknown>, sql: string) => {
      for (const method of ['run', 'all'] as const) this.timeCalls(statement, method, () => sql);
    };
    conn.prepare = function (this: unknown, sql: string, ...rest: unknown[]) {
      const statement = prepare.call(this, sql, ...rest);
      timeStatement(statement, sql);
      return statement;
    };
  }

  /** Replaces `target[method]` with one that times the call until its callback (the last argument). */
  private timeCalls(target: Record<string, unknown>, method: string, sqlOf: (args: unknown[]) => string): void {
    const original = target[method] as (...args: unknown[]) => unknown;
    const record = (sql: string, ms: number) => this.record(sql, ms);
    target[method] = function (this: unknown, ...args: unknown[]) {
      const sql = sqlOf(args);
      const callback = args.pop() as (this: unknown, ...results: unknown[]) => void;
      const started = performance.now();
      return original.call(this, ...args, function (this: unknown, ...results: unknown[]) {
        record(sql, performance.now() - started);
        callback.apply(this, results);
      });
    };
  }
}
