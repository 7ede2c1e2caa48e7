// POST /effects' body as the receiver parses it: key, qty and body, each refused with an issue
// that names the field, and the body kept in its canonical form.
import { describe, expect, test } from 'vitest';
import { parseEffectBody, ReceiverError } from '../../receiver/index.js';

const parse = (value: unknown) =>
  parseEffectBody(Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)));

function refusal(value: unknown): { code: string; issues: unknown } {
  try {
    parse(value);
  } catch (err) {
    if (err instanceof ReceiverError) return { code: err.code, issues: err.details.issues };
    throw err;
  }
  throw new Error(`expected ${JSON.stringify(value)} to be refused`);
}

describe('parseEffectBody', () => {
  test('the fields given, and only those; the body with its object keys sorted', () => {
    expect(parse({ jobId: 'a', qty: 2 })).toEqual({ jobId: 'a', qty: 2 });
    expect(Object.keys(parse({ jobId: 'a', qty: 2 }))).toEqual(['jobId', 'qty']);
    expect(parse({ jobId: 'a', key: 'mail', body: { to: 'x', cc: ['y'] } })).toEqual({
      jobId: 'a',
      key: 'mail',
      body: { cc: ['y'], to: 'x' },
    });
    expect(Object.keys(parse({ jobId: 'a', body: { z: 1, a: 2 } }).body as object)).toEqual(['a', 'z']);
    expect(parse({ jobId: 'a', body: null })).toEqual({ jobId: 'a', body: null });
    expect(parse({ jobId: 'a', key: 'k'.repeat(128), qty: 1, body: 0 })).toEqual({
      jobId: 'a',
      key: 'k'.repeat(128),
      qty: 1,
      body: 0,
    });
  });

  test('a body of exactly 64 KiB serialized is taken, one byte more is refused', () => {
    const text = (bytes: number) => 'x'.repeat(bytes - 2); // the quotes are the other two bytes
    expect(parse({ jobId: 'a', body: text(64 * 1024) }).body).toBe(text(64 * 1024));
    expect(refusal({ jobId: 'a', body: text(64 * 1024 + 1) })).toEqual({
      code: 'invalid_request',
      issues: [{ path: 'body', message: 'body must be at most 65536 bytes serialized as JSON, not 65537' }],
    });
  });

  const refused: Array<[string, unknown, string, RegExp]> = [
    ['neither qty nor body', { jobId: 'a' }, 'qty', /may be left out only when a body is given/],
    ['neither, with a key', { jobId: 'a', key: 'k' }, 'qty', /may be left out only when a body is given/],
    ['an empty key', { jobId: 'a', key: '', qty: 1 }, 'key', /key must not be empty/],
    ['a key of 129 characters', { jobId: 'a', key: 'k'.repeat(129), qty: 1 }, 'key', /at most 128 characters/],
    ['a key with NUL', { jobId: 'a', key: 'a\u0000b', qty: 1 }, 'key', /NUL/],
    ['a key "."', { jobId: 'a', key: '.', qty: 1 }, 'key', /"\." or "\.\."/],
    ['a key with a lone surrogate', '{"jobId":"a","key":"\\ud800","qty":1}', 'key', /lone surrogate/],
    ['a key that is a number', { jobId: 'a', key: 7, qty: 1 }, 'key', /key must be a string of 1 to 128/],
    ['a null key', { jobId: 'a', key: null, qty: 1 }, 'key', /leave it out for the default effect/],
    ['qty 0 beside a body', { jobId: 'a', qty: 0, body: {} }, 'qty', /positive safe integer/],
    ['qty null beside a body', { jobId: 'a', qty: null, body: {} }, 'qty', /positive safe integer/],
  ];
  test.each(refused)('%s is 400 invalid_request naming the field', (_name, value, path, message) => {
    const { code, issues } = refusal(value);
    expect(code).toBe('invalid_request');
    expect(issues).toEqual([{ path, message: expect.stringMatching(message) }]);
  });

  test('an unknown field is named, with the fields there are', () => {
    expect(refusal({ jobId: 'a', qty: 1, boddy: 1 }).issues).toEqual([
      { path: '', message: 'unknown field "boddy"; the body has only jobId, key, qty and body' },
    ]);
  });
});
