// The named-parameter helper every store statement is written with: `@name` becomes `?` in
// order, values follow the placeholders, and a missing or misspelt name is an error.
import { describe, expect, test } from 'vitest';
import { named, namedRows } from '../../platform/named-sql.js';

describe('named SQL', () => {
  test('each @name becomes ? and the values follow the placeholders, a repeated name repeated', () => {
    const statement = named<{ id: string; now: number; token: number }>(
      'UPDATE t SET at = @now WHERE id = @id AND token = @token AND until > @now',
    );
    expect(statement.sql).toBe('UPDATE t SET at = ? WHERE id = ? AND token = ? AND until > ?');
    expect(statement.names).toEqual(['now', 'id', 'token', 'now']);
    expect(statement.bind({ token: 7, now: 100, id: 'a' })).toEqual([100, 'a', 7, 100]);
  });

  test('quoted text and PostgreSQL casts are left alone', () => {
    const statement = named<{ at: number }>(`SELECT 'mail@host', "odd@name", @at::bigint AS at`);
    expect(statement.sql).toBe(`SELECT 'mail@host', "odd@name", ?::bigint AS at`);
    expect(statement.bind({ at: 1 })).toEqual([1]);
  });

  test('null is a value; a missing or an unknown name is an error naming it', () => {
    const statement = named<{ a: number | null; b: number }>('SELECT @a, @b');
    expect(statement.bind({ a: null, b: 2 })).toEqual([null, 2]);
    expect(() => statement.bind({ a: 1 } as never)).toThrow(/@b was given no value/);
    expect(() => statement.bind({ a: 1, b: 2, c: 3 } as never)).toThrow(/has no parameter @c; it takes @a, @b/);
  });

  test('a positional ? outside quotes is refused, so the two forms are never mixed', () => {
    expect(() => named('SELECT ? , @a')).toThrow(/takes @name parameters, not "\?"/);
    expect(named(`SELECT '?' AS q`).sql).toBe(`SELECT '?' AS q`);
  });
});

describe('named rows', () => {
  const insert = namedRows<{ id: string; n: number | null }>(
    ['id', 'n'],
    'INSERT INTO t (id, n) VALUES @rows ON CONFLICT (id) DO NOTHING RETURNING id',
  );

  test('@rows becomes one (?, ?) per row, and the values follow row after row in the order of the columns', () => {
    expect(insert.sql(1)).toBe('INSERT INTO t (id, n) VALUES (?, ?) ON CONFLICT (id) DO NOTHING RETURNING id');
    expect(insert.sql(3)).toBe(
      'INSERT INTO t (id, n) VALUES (?, ?), (?, ?), (?, ?) ON CONFLICT (id) DO NOTHING RETURNING id',
    );
    expect(
      insert.bind([
        { n: 1, id: 'a' },
        { id: 'b', n: null },
      ]),
    ).toEqual(['a', 1, 'b', null]);
  });

  test('no rows, a missing or an unknown field, another parameter or no @rows is an error', () => {
    expect(() => insert.sql(0)).toThrow(/1 row or more, not 0/);
    expect(() => insert.bind([{ id: 'a' } as never])).toThrow(/n was given no value/);
    expect(() => insert.bind([{ id: 'a', n: 1, m: 2 } as never])).toThrow(/no column m; they take id, n/);
    expect(() => namedRows(['a'], 'INSERT INTO t (a) VALUES @rows WHERE @b')).toThrow(/no parameter but @rows/);
    expect(() => namedRows(['a'], 'INSERT INTO t (a) VALUES (?)')).toThrow(/needs @rows/);
  });
});
