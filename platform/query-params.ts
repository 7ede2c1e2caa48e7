// A query string's parameters as the services' listings read them, in one place for the queue
// and the receiver: integers in plain digits only, and a 400 for an unknown one that names the
// parameters the route does take. A parameter given twice is refused before these are read.
import { z } from 'zod';

/**
 * A query parameter's integer as plain digits (a leading minus allowed, for the range check that
 * follows to name): `Number()` would also read "0x10", "1e3" and " " (as 0), each a different
 * number than the caller most likely meant. A parameter given twice never gets here: the query
 * string is refused first (http-edge.ts, parseQueryWith).
 */
export const queryInteger = (name: string) =>
  z
    .string({ error: `${name} must be an integer` })
    .regex(/^-?\d+$/, `${name} must be an integer written in plain digits, as in ${name}=10`)
    .transform(Number);

/** A strict query's error for parameters it does not take, naming the ones it does. */
export const onlyParameters = (route: string, names: string) => ({
  error: (issue: { code: string; keys?: string[] }) =>
    issue.code === 'unrecognized_keys'
      ? `unknown query parameter ${(issue.keys ?? []).map((k) => JSON.stringify(k)).join(', ')}; ${route} takes only ${names}`
      : undefined,
});
