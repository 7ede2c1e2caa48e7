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

/**
 * A statement over several rows of values at once (`INSERT ... VALUES (...), (...)`), on both
 * dialects: `text` is the SQL with `@rows` where the row list goes, and each row's values are
 * bound in the order of `columns`. One SQL text per number of rows, compiled once.
 */
export interface RowsStatement<R extends Params> {
  /** The SQL for `count` rows, with `?` placeholders. */
  sql(count: number): string;
  /** The positional values of `rows`, row after row; a missing or an unknown field is an error. */
  bind(rows: readonly R[]): Knex.Value[];
}

export function namedRows<R extends Params>(columns: readonly (keyof R & string)[], text: string): RowsStatement<R> {
  const head = text.trim().slice(0, 80);
  if (!text.includes('@rows')) throw new Error(`A rows statement needs @rows where its rows go: ${head}`);
  // Its values are the rows' alone: no other parameter, named or positional.
  if (named(text.replace('@rows', '(NULL)')).names.length > 0)
    throw new Error(`A rows statement takes no parameter but @rows: ${head}`);
  const row = `(${columns.map(() => '?').join(', ')})`;
  const texts = new Map<number, string>();
  const known = new Set<string>(columns);
  return {
    sql(count: number): string {
      if (!Number.isSafeInteger(count) || count < 1)
        throw new RangeError(`A rows statement needs 1 row or more, not ${count}.`);
      let sql = texts.get(count);
      if (sql === undefined) {
        sql = text.replace('@rows', Array.from({ length: count }, () => row).join(', '));
        texts.set(count, sql);
      }
      return sql;
    },
    bind(rows: readonly R[]): Knex.Value[] {
      const values: Knex.Value[] = [];
      for (const given of rows) {
        for (const key of Object.keys(given)) {
          if (!known.has(key)) throw new Error(`The rows have no column ${key}; they take ${columns.join(', ')}.`);
        }
        for (const column of columns) {
          const value = given[column];
          if (value === undefined) throw new Error(`A row's ${column} was given no value (use null for NULL).`);
          values.push(value);
        }
      }
      return values;
    },
  };
}
