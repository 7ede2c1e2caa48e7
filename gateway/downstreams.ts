// The gateway's named downstreams: each a name, the effect endpoint sends to it are forwarded to
// (path included) and the secret that signs them. `receiver` is the leasehold receiver given as a
// base URL, and the downstream a send goes to when it names none.
import { describeValue } from '../platform/describe-value.js';
import { urlUnder } from '../platform/exchange.js';
import { httpUrl } from '../platform/url.js';
import { DEFAULT_DOWNSTREAM } from './types.js';
import { checkOptionNames, type OptionNames } from '../platform/option-names.js';

/** A name is a word an operator types and an environment variable can carry (`LEASEHOLD_SECRET_<NAME>`). */
const NAME = /^[A-Za-z][A-Za-z0-9_-]{0,63}$/;

export interface DownstreamOptions {
  /** The downstream's effect endpoint, path included (`http://billing:8080/hooks/effects`). */
  url: string;
  /** Signs what is forwarded to it; default: the gateway's `secret`. */
  secret?: string | undefined;
}

const DOWNSTREAM_OPTION_NAMES: OptionNames<DownstreamOptions> = { url: true, secret: true };

export interface Downstream {
  name: string;
  /** The endpoint effects are posted to. */
  url: URL;
  secret: string | undefined;
}

/** Why `name` cannot name a downstream, or undefined when it can. */
export function downstreamNameProblem(name: string): string | undefined {
  return NAME.test(name)
    ? undefined
    : `a downstream's name must be a letter followed by up to 63 letters, digits, "-" or "_", not ${JSON.stringify(name)}`;
}

/** `billing` → `LEASEHOLD_SECRET_BILLING`; `-` becomes `_`, as a variable's name cannot hold it. */
export function downstreamSecretVariable(name: string): string {
  return `LEASEHOLD_SECRET_${name.toUpperCase().replace(/-/g, '_')}`;
}

/**
 * Every downstream the gateway forwards to, by name. `receiverUrl` (a receiver's base URL) is the
 * downstream named `receiver` unless `downstreams` names one itself; both at once is refused, as
 * one of the two would be silently ignored. Throws RangeError naming the option that is wrong.
 */
export function resolveDownstreams(
  receiverUrl: string | undefined,
  downstreams: Readonly<Record<string, DownstreamOptions>>,
  secret: string | undefined,
  receiverSecret: string | undefined = undefined,
): Map<string, Downstream> {
  const resolved = new Map<string, Downstream>();
  const variables = new Map<string, string>();
  if (receiverUrl !== undefined && downstreams[DEFAULT_DOWNSTREAM] !== undefined) {
    throw new RangeError(
      `receiverUrl and downstreams.${DEFAULT_DOWNSTREAM} both name the downstream "${DEFAULT_DOWNSTREAM}"; give one of them.`,
    );
  }
  if (receiverUrl !== undefined) {
    const base = httpUrl('receiverUrl', receiverUrl);
    resolved.set(DEFAULT_DOWNSTREAM, {
      name: DEFAULT_DOWNSTREAM,
      url: urlUnder(base, ['effects']),
      secret: receiverSecret ?? secret,
    });
    variables.set(downstreamSecretVariable(DEFAULT_DOWNSTREAM), DEFAULT_DOWNSTREAM);
  }
  for (const [name, options] of Object.entries(downstreams)) {
    const problem = downstreamNameProblem(name);
    if (problem !== undefined) throw new RangeError(`downstreams: ${problem}.`);
    const variable = downstreamSecretVariable(name);
    const twin = variables.get(variable);
    if (twin !== undefined) {
      throw new RangeError(
        `downstreams: "${twin}" and "${name}" would share the secret variable ${variable}; rename one of them.`,
      );
    }
    variables.set(variable, name);
    if (typeof options !== 'object' || options === null) {
      throw new TypeError(`downstreams.${name} must be {url, secret?}, not ${describeValue(options)}.`);
    }
    checkOptionNames(`downstreams.${name}`, options, DOWNSTREAM_OPTION_NAMES);
    if (options.secret !== undefined && typeof options.secret !== 'string') {
      throw new TypeError(`downstreams.${name}.secret must be a string, not ${describeValue(options.secret)}.`);
    }
    if (options.secret === '') {
      throw new RangeError(`downstreams.${name}: the secret must not be empty; leave it out to use the gateway's.`);
    }
    resolved.set(name, {
      name,
      url: httpUrl(`downstreams.${name}`, options.url),
      secret: options.secret ?? secret,
    });
  }
  return resolved;
}

/**
 * One `NAME=VALUE` of `--downstream` or `--downstream-secret`: the name before the first `=`,
 * the value after it (a URL or a secret may hold `=` itself).
 */
export function parseNamedValue(text: string, what: string): { name: string; value: string } {
  const eq = text.indexOf('=');
  const name = eq < 0 ? text : text.slice(0, eq);
  const value = eq < 0 ? '' : text.slice(eq + 1);
  if (eq < 0 || value === '') {
    throw new RangeError(`must be NAME=${what}, not ${JSON.stringify(text)}`);
  }
  const problem = downstreamNameProblem(name);
  if (problem !== undefined) throw new RangeError(problem);
  return { name, value };
}
