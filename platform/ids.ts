// What a job id or an owner name may be, in one place for the queue, the gateway and the
// receiver: what one service accepts, the others store and route the same way, in SQLite and
// PostgreSQL alike. Free text (an error message, a reason) is kept, made storable instead.
import { z } from 'zod';

/** In `u` mode a surrogate pair is one code point, so only a lone surrogate is in category Cs. */
const LONE_SURROGATE = /\p{Cs}/u;
const LONE_SURROGATES = /\p{Cs}/gu;

/** The most UTF-16 code units an id or owner may have; a PostgreSQL varchar(256) always holds it. */
export const MAX_ID_LENGTH = 256;

/** The most UTF-16 code units an effect's key may have: the id rule, shorter. */
export const MAX_KEY_LENGTH = 128;

/**
 * Why `value` cannot be an id or owner named `what`, or undefined when it can. Each rule keeps
 * two different ids from becoming one, or an id from failing where it is stored or routed:
 * a lone surrogate is rewritten to U+FFFD by both database drivers (two ids would share a row),
 * PostgreSQL refuses NUL in text, and `.` and `..` collapse in a URL path.
 */
export function idProblem(value: string, what: string, maxLength = MAX_ID_LENGTH): string | undefined {
  if (value.length === 0) return `${what} must not be empty`;
  if (value.length > maxLength) return `${what} must be at most ${maxLength} characters`;
  if (LONE_SURROGATE.test(value)) return `${what} must be well-formed Unicode (it has a lone surrogate)`;
  if (value.includes('\0')) return `${what} must not contain a NUL character`;
  if (value === '.' || value === '..') return `${what} must not be "." or ".." (they collapse in a URL path)`;
  return undefined;
}

/**
 * The zod schema of an id or owner named `what`. `required` words the issue for a missing or
 * non-string value (default: "<what> must be a string"). The length limits are zod's own, so a
 * schema document generated from it shows them; `maxLength` is shorter for an effect's key.
 */
export function idSchema(
  what: string,
  required?: (issue: { input?: unknown }) => string,
  maxLength = MAX_ID_LENGTH,
): z.ZodString {
  return z
    .string({ error: required ?? `${what} must be a string` })
    .min(1, `${what} must not be empty`)
    .max(maxLength, `${what} must be at most ${maxLength} characters`)
    .check((ctx) => {
      if (ctx.value.length === 0 || ctx.value.length > maxLength) return;
      const problem = idProblem(ctx.value, what, maxLength);
      if (problem !== undefined) ctx.issues.push({ code: 'custom', message: problem, input: ctx.value });
    });
}

/**
 * Free text as every store keeps it: lone surrogates and NUL become U+FFFD, which is what
 * SQLite's and PostgreSQL's drivers would make of the first and what PostgreSQL refuses of the
 * second, so the text stored is the text answered, in either dialect.
 */
export function storableText(text: string): string {
  return text.replace(LONE_SURROGATES, '\uFFFD').replaceAll('\0', '\uFFFD');
}
