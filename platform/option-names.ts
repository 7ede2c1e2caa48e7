// Option objects checked by name. A caller writing JavaScript gets no help from the types, and a
// misspelt option (`concurency: 8`) would otherwise be ignored without a word: the call runs on
// the default, not on what was written, and nothing points at the typo.
import { describeValue } from './describe-value.js';

/**
 * Every option name of `T`, each `true`. Written as a literal of this type, the compiler checks
 * that the list is complete and holds no name `T` lacks, so it cannot drift from the interface.
 */
export type OptionNames<T> = { readonly [K in keyof T]-?: true };

/**
 * `options`, unless it is neither undefined nor an object whose every own key is in `names`: then
 * a TypeError for something that is not an object, or a RangeError naming the unknown keys (with
 * the known name each most likely meant) and listing the options `what` takes.
 */
export function checkOptionNames<T>(what: string, options: T, names: Readonly<Record<string, true>>): T {
  if (options === undefined) return options;
  const known = Object.keys(names);
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new TypeError(`${what} takes an object of options, not ${describeValue(options)}.`);
  }
  const unknown = Object.keys(options).filter((key) => !Object.hasOwn(names, key));
  if (unknown.length === 0) return options;
  const named = unknown.map((key) => {
    const meant = likelyMeant(key, known);
    return meant === undefined ? JSON.stringify(key) : `${JSON.stringify(key)} (did you mean ${meant}?)`;
  });
  throw new RangeError(`${what} does not take ${named.join(', ')}; its options are ${known.join(', ')}.`);
}

/** `checkOptionNames` for a call whose options are required: undefined is refused too. */
export function checkRequiredOptions<T>(what: string, options: T, names: Readonly<Record<string, true>>): T {
  if (options === undefined) throw new TypeError(`${what} takes an object of options, not undefined.`);
  return checkOptionNames(what, options, names);
}

/** The known name `key` is closest to, if it differs from it by case alone or by two edits at most. */
function likelyMeant(key: string, known: readonly string[]): string | undefined {
  const lower = key.toLowerCase();
  const sameButCase = known.find((name) => name.toLowerCase() === lower);
  if (sameButCase !== undefined) return sameButCase;
  let best: { name: string; distance: number } | undefined;
  for (const name of known) {
    const distance = editDistance(lower, name.toLowerCase());
    if (distance <= 2 && (best === undefined || distance < best.distance)) best = { name, distance };
  }
  return best?.name;
}

/** Levenshtein distance: insertions, deletions and substitutions. */
function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const substitution = previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1);
      current.push(Math.min(previous[j]! + 1, current[j - 1]! + 1, substitution));
    }
    previous = current;
  }
  return previous[b.length]!;
}
