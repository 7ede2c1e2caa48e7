// A value as an error message shows it: what the caller passed, short enough for one line.

/** A job id given to a library call (an assertion, a stub's read): a non-empty string. */
export function checkJobIdArgument(method: string, jobId: unknown): void {
  if (typeof jobId !== 'string' || jobId === '') {
    throw new TypeError(`${method} takes the job's id, a non-empty string, first; not ${describeValue(jobId)}.`);
  }
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
