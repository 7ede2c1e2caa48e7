// What the stores' raw SQL runs on, and the rows it answers, the same for both services and
// both dialects.
import type { Knex } from 'knex';

/**
 * A knex handle or transaction, or (on SQLite's write path) a connection inside
 * `BEGIN IMMEDIATE` that runs prepared statements directly.
 */
export interface Executor {
  raw(sql: string, bindings: readonly Knex.Value[]): PromiseLike<unknown>;
}

export type Row = Record<string, unknown>;

/** knex's raw() resolves with the rows on SQLite and with a result object on PostgreSQL. */
export function rowsOf(result: unknown): Row[] {
  if (Array.isArray(result)) return result as Row[];
  return (result as { rows?: Row[] }).rows ?? [];
}
