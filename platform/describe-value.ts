// A value as an error message shows it: what the caller passed, short enough for one line.
import { idProblem, MAX_KEY_LENGTH } from './ids.js';

/** A job id given to a library call (an assertion, a stub's read): a non-empty string. */
export function checkJobIdArgument(method: string, jobId: unknown): void {
  if (typeof jobId !== 'string' || jobId === '') {
    throw new TypeError(`${method} takes the job's id, a non-empty string, first; not ${describeValue(jobId)}.`);
  }
}

/**
 * An effect's key given to a library call: one some effect could have, by the gateway's and the
 * receiver's rule for keys (the id rule, at most 128 characters); else a RangeError, since a read
 * or an assertion under it would find nothing whatever was sent. The empty string is not the
 * default effect's key: that one has none, and `defaultEffect` says how the caller names it.
 */
export function checkEffectKeyArgument(method: string, key: string, defaultEffect: string): void {
  const problem = idProblem(key, 'key', MAX_KEY_LENGTH);
  if (problem === undefined) return;
  const hint = key === '' ? ` The default effect has no key: ${defaultEffect}.` : '';
  throw new RangeError(`${method}: no effect can have the key ${shortly(key)}: ${problem}.${hint}`);
}

/** A string as a message quotes it: whole when short, its start and its length when long. */
function shortly(text: string): string {
  return text.length <= 40 ? JSON.stringify(text) : `${JSON.stringify(text.slice(0, 20))}… (${text.length} characters)`;
}

/** `"text"`, `5`, `null`, `undefined`, `{}`, `["k"]`, `a function`; `an object` for one too long to show. */
export function describeValue(value: unknown): string {
  if (typeof value === 'function') return 'a function';
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value !== 'object' || value === null) return String(value);
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch {
    text = undefined;
  }
  if (text !== undefined && text.length <= 60) return text;
  return Array.isArray(value) ? 'an array' : 'an object';
}

/**
 * A wait of whole milliseconds, 0 or more, named `name` (`waitForEffect: timeoutMs`): a value of
 * another kind is a TypeError that quotes it, a number out of range a RangeError.
 */
export function checkWaitMs(name: string, value: unknown): number {
  const rule = `${name} must be a whole number of milliseconds, 0 or more`;
  if (typeof value !== 'number') throw new TypeError(`${rule}, not ${describeValue(value)}.`);
  if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`${rule}, not ${String(value)}.`);
  return value;
}
