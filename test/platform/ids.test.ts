// What an id or owner may be, the one rule the queue, the gateway and the receiver share, and
// how free text is made storable.
import { describe, expect, test } from 'vitest';
import { idProblem, idSchema, MAX_ID_LENGTH, storableText } from '../../platform/ids.js';

describe('ids and owners', () => {
  test.each([
    ['a plain id', 'invoice-7'],
    ['slashes, spaces and punctuation', 'b/c d?e#f'],
    ['an emoji (a surrogate pair)', 'job-\u{1F600}'],
    ['dots that are not a whole segment', '...'],
    ['exactly 256 characters', 'x'.repeat(MAX_ID_LENGTH)],
  ])('%s is accepted', (_name, id) => {
    expect(idProblem(id, 'id')).toBeUndefined();
    expect(idSchema('id').safeParse(id).success).toBe(true);
  });

  test.each([
    ['empty', '', /must not be empty/],
    ['257 characters', 'x'.repeat(MAX_ID_LENGTH + 1), /at most 256 characters/],
    ['a lone high surrogate', 'job-\ud800', /well-formed Unicode/],
    ['a lone low surrogate', '\udc00-job', /well-formed Unicode/],
    ['a NUL character', 'job\u0000x', /NUL/],
    ['"."', '.', /"\." or "\.\."/],
    ['".."', '..', /"\." or "\.\."/],
  ])('%s is refused with one issue saying why', (_name, id, reason) => {
    expect(idProblem(id, 'id')).toMatch(reason);
    const result = idSchema('id').safeParse(id);
    expect(result.success).toBe(false);
    expect(result.error?.issues.map((issue) => issue.message)).toEqual([expect.stringMatching(reason)]);
  });

  test('two ids that a driver would store alike are never both accepted', () => {
    // Both drivers write a lone surrogate as U+FFFD: accepted, these two would share one row.
    expect(idProblem('a\ud800', 'id')).toBeDefined();
    expect(idProblem('a\ufffd', 'id')).toBeUndefined();
  });

  test('a value that is not a string is refused in the caller’s words', () => {
    expect(idSchema('owner').safeParse(3).error?.issues[0]?.message).toBe('owner must be a string');
    expect(idSchema('jobId', () => 'jobId is required').safeParse(undefined).error?.issues[0]?.message).toBe(
      'jobId is required',
    );
  });

  test('free text keeps every character a store can keep, and U+FFFD for the rest', () => {
    expect(storableText('plain \u{1F600} text')).toBe('plain \u{1F600} text');
    expect(storableText('a\u0000b\ud800c')).toBe('a\ufffdb\ufffdc');
  });
});
