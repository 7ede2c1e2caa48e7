// Named parameters for raw SQL: a statement is written with `@name` placeholders, so a reordered
// list of values cannot silently swap two of them, and is sent in the positional form (`?`) that
// knex's raw() and node-sqlite3's prepared statements take. Compiled once per statement text.
import type { Knex } from 'knex';

export type Params = Record<string, Knex.Value>;

/** A statement compiled from named SQL: the positional text, and the values in its order. */
export interface NamedStatement<P extends Params> {
  /** The SQL with every `@name` replaced by `?`, as the driver takes it. */
  readonly sql: string;
  /** The names, in the order of the placeholders (a name used twice appears twice). */
  readonly names: readonly string[];
  /** The positional values for `params`; a missing or an unknown name is an error, not a NULL. */
  bind(params: P): Knex.Value[];
}

// `@name` outside quoted text; `'...'` and `"..."` are copied as they are, so a literal holding
// an at sign is left alone. PostgreSQL's `::type` casts never start with `@`.
const TOKEN = /'(?:[^']|'')*'|"(?:[^"]|"")*"|@([A-Za-z_][A-Za-z0-9_]*)|(\?)/g;

/** Compiles `text`, whose parameters are written `@name`. */
export function named<P extends Params>(text: string): NamedStatement<P> {
  const names: string[] = [];
  const sql = text.replace(TOKEN, (token: string, name: string | undefined, positional: string | undefined) => {
    // Mixing the two forms would make the order of values matter again.
    if (positional) throw new Error(`Named SQL takes @name parameters, not "?": ${text.trim().slice(0, 80)}`);
    if (name === undefined) return token;
    names.push(name);
    return '?';
  });
  const known = new Set(names);
  return {
    sql,
    names,
    bind(params: P): Knex.Value[] {
      for (const key of Object.keys(params)) {
        if (!known.has(key))
          throw new Error(
            `The statement has no parameter @${key}; it takes ${[...known].map((n) => `@${n}`).join(', ')}.`,
          );
      }
      return names.map((name) => {
        const value = params[name];
        if (value === undefined)
          throw new Error(`The statement's parameter @${name} was given no value (use null for NULL).`);
        return value;
      });
    },
  };
}
