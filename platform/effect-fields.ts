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

/** An effect's body: any JSON value (null included), at most 64 KiB serialized. */
export const effectBody = z.json({ error: 'body must be a JSON value' }).check((ctx) => {
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
