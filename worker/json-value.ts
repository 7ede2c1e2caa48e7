// What a handler's result and an effect's body may be: a JSON value, one that comes back from JSON
// as it went in. JSON.stringify changes anything else without a word (a function left out, NaN
// written as null, a Date as a string, a Map as {}), so the worker refuses it instead, saying where.
import { MAX_JSON_DEPTH } from '../platform/json-limits.js';

/**
 * Where `value` is not a JSON value, and what is there instead (`body.items[2].when is a Date,
 * ...`); undefined when it is one. `root` names the value (`result`, `body`). A JSON value is
 * null, a boolean, a finite number, a string, an array of JSON values, or a plain object (made by
 * `{}`, JSON.parse or Object.create(null)) whose own enumerable properties are JSON values or
 * undefined: a property set to undefined is left out, as JSON.stringify leaves it out and as an
 * option set to undefined counts as left out. Values nested deeper than the services take (64
 * levels) are not looked at: the depth limits refuse them anyway.
 */
export function jsonValueProblem(value: unknown, root: string): string | undefined {
  // The way from the root to where the walk is, and the objects along it (the root's first): a
  // path is spelled out only for the message.
  const keys: Array<string | number> = [];
  const ancestors: object[] = [];
  const pathTo = (length = keys.length) => keys.slice(0, length).reduce<string>(step, root);
  let problem: string | undefined;
  const fine = (value: unknown, depth: number): boolean => {
    const kind = notJson(value);
    if (kind !== undefined) {
      problem = `${pathTo()} is ${kind}`;
      return false;
    }
    if (typeof value !== 'object' || value === null || depth > MAX_JSON_DEPTH) return true;
    const again = ancestors.indexOf(value);
    if (again >= 0) {
      problem = `${pathTo()} is ${pathTo(again)} again (a cycle), which JSON cannot hold`;
      return false;
    }
    ancestors.push(value);
    if (Array.isArray(value)) {
      for (let i = 0; i < value.length; i++) {
        keys.push(i);
        if (!(i in value)) problem = `${pathTo()} is an empty slot, which JSON writes as null`;
        else if (value[i] === undefined) problem = `${pathTo()} is undefined, which JSON writes as null in an array`;
        if (problem !== undefined || !fine(value[i], depth + 1)) return false;
        keys.pop();
      }
    } else {
      for (const name of Object.keys(value)) {
        keys.push(name);
        const member = (value as Record<string, unknown>)[name];
        if (member !== undefined && !fine(member, depth + 1)) return false;
        keys.pop();
      }
      const symbol = Object.getOwnPropertySymbols(value).find((key) =>
        Object.prototype.propertyIsEnumerable.call(value, key),
      );
      if (symbol !== undefined) {
        problem = `${pathTo()} has a symbol key (${String(symbol)}), which JSON leaves out`;
        return false;
      }
    }
    ancestors.pop();
    return true;
  };
  try {
    return fine(value, 1) ? undefined : problem;
  } catch (err) {
    // A getter or a proxy that throws: JSON.stringify would throw the same.
    return `${pathTo()} cannot be read (${err instanceof Error ? err.message : String(err)})`;
  }
}

/** What `value` is when it is not JSON in itself (its members aside): `a function`, `NaN, ...`; undefined otherwise. */
function notJson(value: unknown): string | undefined {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return undefined;
    case 'number':
      return Number.isFinite(value) ? undefined : `${String(value)}, which JSON writes as null`;
    case 'bigint':
      return `a BigInt (${String(value)}n), which JSON cannot hold: give it as a string or a number`;
    case 'function':
      return 'a function, which JSON leaves out';
    case 'symbol':
      return 'a symbol, which JSON leaves out';
    case 'undefined':
      return 'undefined, which JSON cannot hold';
  }
  if (value === null || Array.isArray(value)) return undefined;
  const prototype = Object.getPrototypeOf(value) as object | null;
  if (prototype === Object.prototype || prototype === null) return undefined;
  if (value instanceof Date) return 'a Date, which JSON writes as a string: give date.toISOString() or date.getTime()';
  const name = (prototype as { constructor?: { name?: unknown } }).constructor?.name;
  const what = typeof name === 'string' && name !== '' ? `${/^[aeiou]/i.test(name) ? 'an' : 'a'} ${name}` : 'an object';
  return `${what}, not a plain object or an array`;
}

/** One step further along a path: `body.items`, `body.items[2]`, or `body["two words"]` for a name that is not an identifier. */
function step(path: string, key: string | number): string {
  if (typeof key === 'number') return `${path}[${key}]`;
  return /^[A-Za-z_$][\w$]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`;
}
