// An options object checked by name: unknown names are refused with the name most likely meant,
// and the list the call takes.
import { describe, expect, test } from 'vitest';
import { checkOptionNames } from '../../platform/option-names.js';

const NAMES = { concurrency: true, leaseMs: true, name: true, waitMs: true } as const;

describe('checkOptionNames', () => {
  test('answers the options themselves when every name is known, and undefined as it is', () => {
    const options = { concurrency: 8, leaseMs: 30_000 };
    expect(checkOptionNames('createWorker', options, NAMES)).toBe(options);
    expect(checkOptionNames('createWorker', {}, NAMES)).toEqual({});
    expect(checkOptionNames('createWorker', undefined, NAMES)).toBeUndefined();
  });

  test('a misspelt name is refused, with the name it most likely meant', () => {
    expect(() => checkOptionNames('createWorker', { concurency: 8 }, NAMES)).toThrow(
      new RangeError(
        'createWorker does not take "concurency" (did you mean concurrency?); its options are concurrency, leaseMs, name, waitMs.',
      ),
    );
    expect(() => checkOptionNames('createWorker', { leasems: 10 }, NAMES)).toThrow(
      'createWorker does not take "leasems" (did you mean leaseMs?)',
    );
    expect(() => checkOptionNames('createWorker', { wait: 10 }, NAMES)).toThrow(
      'createWorker does not take "wait" (did you mean waitMs?)',
    );
  });

  test('a name like none is refused without a guess, and every unknown name is named', () => {
    expect(() => checkOptionNames('createWorker', { retries: 3, name: 'w', colour: 'red' }, NAMES)).toThrow(
      new RangeError(
        'createWorker does not take "retries", "colour"; its options are concurrency, leaseMs, name, waitMs.',
      ),
    );
  });

  test('an unknown name is refused even when its value is undefined: it is still not what was meant', () => {
    expect(() => checkOptionNames('createWorker', { concurency: undefined }, NAMES)).toThrow(RangeError);
  });

  test('something that is not an object is a TypeError', () => {
    for (const [value, shown] of [
      [5, '5'],
      [null, 'null'],
      ['x', '"x"'],
      [[1], '[1]'],
    ] as const) {
      expect(() => checkOptionNames('createWorker', value, NAMES)).toThrow(
        new TypeError(`createWorker takes an object of options, not ${shown}.`),
      );
    }
  });

  test('inherited names are not options: only own keys are looked at, and only own names are known', () => {
    const inherited = Object.create({ colour: 'red' }) as object;
    expect(checkOptionNames('createWorker', inherited, NAMES)).toBe(inherited);
    expect(() => checkOptionNames('createWorker', { toString: 1 }, NAMES)).toThrow(
      'createWorker does not take "toString"',
    );
  });
});
