// What an effect's `key` and `body` may be, in one place for the gateway that forwards them and
// the receiver that records them: a field one accepts, the other takes alike. Also the canonical
// form in which two bodies are compared, object key order ignored.
import { z } from 'zod';
import { idSchema, MAX_KEY_LENGTH } from './ids.js';

/** The most bytes an effect's body may take, serialized as JSON (`JSON.stringify`, UTF-8). */
export const MAX_BODY_BYTES = 64 * 1024;

/** An effect's key: the id rule, at most 128 characters. */
export const effectKey = idSchema(
  'key',
  (issue) =>
    `key must be a string of 1 to ${MAX_KEY_LENGTH} characters${issue.input === null ? ' (leave it out for the default effect)' : ''}`,
  MAX_KEY_LENGTH,
);

/** The size `MAX_BODY_BYTES` limits: the body serialized as JSON, in UTF-8 bytes. */
export function serializedBytes(value: unknown): number {
  return Buffer.byteLength(JSON.stringify(value), 'utf8');
}

/**
 * The first number in `value` that is not finite, and its path below the body. JSON has no
 * Infinity, but a number past its range parses as one: `1e999` reads back as Infinity.
 */
function infiniteIn(
  value: unknown,
  path: Array<string | number> = [],
): { path: Array<string | number>; value: number } | undefined {
  if (typeof value === 'number') return Number.isFinite(value) ? undefined : { path, value };
  if (typeof value !== 'object' || value === null) return undefined;
  for (const [name, member] of Object.entries(value)) {
    const found = infiniteIn(member, [...path, Array.isArray(value) ? Number(name) : name]);
    if (found) return found;
  }
  return undefined;
}

/**
 * An effect's body: any JSON value (null included), at most 64 KiB serialized. A number beyond
 * JSON's range (`1e999`, parsed as Infinity) is refused where it is, saying so: zod's JSON check
 * would call the whole body "Invalid input".
 */
export const effectBody = z
  .unknown()
  .check((ctx) => {
    const found = infiniteIn(ctx.value);
    if (found === undefined) return;
    ctx.issues.push({
      code: 'custom',
      message: `a number beyond the range of a JSON number (it reads as ${found.value}); numbers must lie within ±${Number.MAX_VALUE}`,
      input: ctx.value,
      path: found.path,
    });
  })
  .pipe(z.json({ error: 'body must be a JSON value' }))
  .check((ctx) => {
    const bytes = serializedBytes(ctx.value);
    if (bytes > MAX_BODY_BYTES) {
      ctx.issues.push({
        code: 'custom',
        message: `body must be at most ${MAX_BODY_BYTES} bytes serialized as JSON, not ${bytes}`,
        input: ctx.value,
      });
    }
  });

/**
 * `value` with every object's keys rebuilt in sorted order, so two JSON values that differ only in
 * key order serialize alike: the form bodies are recorded, answered and compared in. (An object
 * lists integer-like keys first whatever the order they were added in; the form is still one.)
 */
export function canonicalBody(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonicalBody);
  if (value === null || typeof value !== 'object') return value;
  // fromEntries defines each key as an own property, "__proto__" included.
  return Object.fromEntries(
    Object.keys(value)
      .sort()
      .map((name) => [name, canonicalBody((value as Record<string, unknown>)[name])]),
  );
}

/** `value` serialized in its canonical form: equal for bodies that differ only in key order. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(canonicalBody(value));
}
