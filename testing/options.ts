// The options of `startSystem` and of the assertions, checked before anything starts. A test written in JavaScript gets
// no help from the types, and a wrong option would otherwise start a system that fails later, at
// its first request, far from the mistake (a clock that is not one), or quietly runs a different
// test than the one written (a misspelt `clok: 'manual'` on the real clock).

import { checkEffectKeyArgument, checkWaitMs, describeValue } from '../platform/describe-value.js';
import { checkOptionNames, type OptionNames } from '../platform/option-names.js';
import { checkDbOption } from '../platform/postgres.js';
import type { DownstreamOption, SystemOptions } from './system.js';

const KNOWN: OptionNames<SystemOptions> = { db: true, clock: true, secret: true, apiKey: true, downstreams: true };
const DOWNSTREAM_NAMES: OptionNames<Exclude<DownstreamOption, 'stub'>> = { url: true, secret: true };

/** Throws a TypeError or RangeError naming the first option that is not what `startSystem` takes. */
export function checkSystemOptions(options: unknown): void {
  if (options === undefined) return;
  if (!isRecord(options)) throw new TypeError(`startSystem takes an object of options, not ${describeValue(options)}.`);
  checkOptionNames('startSystem', options, KNOWN);
  const { db, clock, secret, apiKey, downstreams } = options;
  if (db !== undefined) checkDbOption(db);
  if (clock !== undefined && clock !== 'real' && clock !== 'manual' && !isClock(clock)) {
    throw new TypeError(
      `clock must be "real", "manual" or an object with a now() method, not ${describeValue(clock)}.`,
    );
  }
  for (const [name, value] of [
    ['secret', secret],
    ['apiKey', apiKey],
  ] as const) {
    if (value !== undefined && typeof value !== 'string') {
      throw new TypeError(`${name} must be a string, not ${describeValue(value)}.`);
    }
  }
  if (downstreams === undefined) return;
  if (!isRecord(downstreams)) {
    throw new TypeError(`downstreams must be an object of downstreams by name, not ${describeValue(downstreams)}.`);
  }
  for (const [name, value] of Object.entries(downstreams)) {
    if (value === 'stub') continue;
    if (!isRecord(value) || typeof value.url !== 'string') {
      throw new TypeError(`downstreams.${name} must be "stub" or {url, secret?}, not ${describeValue(value)}.`);
    }
    checkOptionNames(`startSystem's downstreams.${name}`, value, DOWNSTREAM_NAMES);
    if (value.secret !== undefined && typeof value.secret !== 'string') {
      throw new TypeError(`downstreams.${name}.secret must be a string, not ${describeValue(value.secret)}.`);
    }
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isClock(value: unknown): boolean {
  return isRecord(value) && typeof value.now === 'function';
}

/**
 * The options of an assertion: `to` and `key` (and `timeoutMs` where it waits). An unknown name is
 * refused, since an assertion that ignored it would pass for a reason the test did not mean
 * (`expectExactlyOnce({ jobId })` checks every job, not one); so is a key no effect can have
 * (`expectNoEffect` would pass on it whatever was sent), the empty one included: the default
 * effect is `null`, or `key` left out.
 */
export function checkChoice(method: string, choice: unknown, also: readonly string[] = []): void {
  if (choice === undefined) return;
  const known = ['to', 'key', ...also];
  if (!isRecord(choice)) {
    throw new TypeError(`${method} takes options {${known.join(', ')}}, not ${describeValue(choice)}.`);
  }
  checkOptionNames(method, choice, Object.fromEntries(known.map((name) => [name, true] as const)));
  const { to, key } = choice;
  const names = (value: unknown, ok: (one: unknown) => boolean) =>
    value === undefined || ok(value) || (Array.isArray(value) && value.length > 0 && value.every(ok));
  if (!names(to, (one) => typeof one === 'string')) {
    throw new TypeError(`${method}: to must be a downstream's name or a list of them, not ${describeValue(to)}.`);
  }
  if (!names(key, (one) => typeof one === 'string' || one === null)) {
    throw new TypeError(
      `${method}: key must be an effect's key, null for the default effect, or a list of them, not ${describeValue(key)}.`,
    );
  }
  for (const one of Array.isArray(key) ? (key as unknown[]) : [key]) {
    if (typeof one === 'string') checkEffectKeyArgument(method, one, 'name it with null');
  }
  if (also.includes('timeoutMs') && choice.timeoutMs !== undefined)
    checkWaitMs(`${method}: timeoutMs`, choice.timeoutMs);
}
