// `leasehold gateway`: its flags, and the downstreams they name; starting, printing the URL and
// stopping are platform/service-main.ts's. The only gateway module that touches `process`.
import { Option, type Command } from 'commander';
import {
  apiKeyOption,
  checkOptions,
  envVariable,
  firstByteTimeoutOption,
  headersTimeoutOption,
  leaseholdCommand,
  logLevelOption,
  maxConnectionsOption,
  parsePositiveInt,
  portOption,
  requestTimeoutOption,
  SECRETS_IN_VARIABLES,
} from '../platform/flags.js';
import { serverLimitsOf } from '../platform/listen.js';
import { serviceAction } from '../platform/service-main.js';
import { httpUrl, redactUrl } from '../platform/url.js';
import { downstreamSecretVariable, parseNamedValue, type DownstreamOptions } from './downstreams.js';
import { GATEWAY_DEFAULTS, resolveGatewayOptions } from './options.js';
import { DEFAULT_DOWNSTREAM } from './types.js';
import { startGateway } from './service.js';

interface GatewayFlags {
  port: number;
  host: string;
  queue: string;
  receiver: string;
  secret?: string;
  downstream: string[];
  downstreamSecret: string[];
  receiverTimeoutMs: number;
  queueTimeoutMs: number;
  retryAttempts: number;
  retryBudgetMs: number;
  apiKey?: string;
  firstByteTimeoutMs?: number;
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  maxConnections: number;
  logLevel: string;
}

export function gatewayCommand(): Command {
  const d = GATEWAY_DEFAULTS;
  return leaseholdCommand('gateway')
    .description(
      'Run the fencing gateway: POST /send verifies the lease with the queue, then forwards the effect to the receiver stamped with the verified fencing token.',
    )
    .addOption(portOption(4200))
    .option('--host <host>', 'address to bind to', '127.0.0.1')
    .option('--queue <url>', "the queue's base URL (leases are verified there)", 'http://127.0.0.1:4100')
    .option('--receiver <url>', "the receiver's base URL (effects are forwarded there)", 'http://127.0.0.1:4300')
    .addOption(
      new Option(
        '--downstream <name=url>',
        'another downstream a send\'s "to" may name: its effect endpoint, path included (repeatable; or LEASEHOLD_DOWNSTREAMS=name=url,name=url)',
      )
        .argParser(collect)
        .default([], 'none'),
    )
    .addOption(new Option('--secret <secret>', 'shared secret: sign every forwarded request with Leasehold-Signature'))
    .addOption(
      new Option(
        '--downstream-secret <name=secret>',
        "a downstream's own secret, instead of --secret (repeatable; or LEASEHOLD_SECRET_<NAME>)",
      )
        .argParser(collect)
        .default([], 'none'),
    )
    .addOption(
      new Option('--receiver-timeout-ms <ms>', 'how long one attempt waits for the receiver')
        .argParser(parsePositiveInt)
        .default(d.receiverTimeoutMs),
    )
    .addOption(
      new Option('--queue-timeout-ms <ms>', 'how long one lease check waits for the queue')
        .argParser(parsePositiveInt)
        .default(d.queueTimeoutMs),
    )
    .addOption(
      new Option(
        '--retry-attempts <n>',
        'attempts per send, the first included, after timeouts, resets and 5xx (1 = no retry)',
      )
        .argParser(parsePositiveInt)
        .default(d.retryAttempts),
    )
    .addOption(
      new Option(
        '--retry-budget-ms <ms>',
        'all attempts of one send start and end within this long (at least --receiver-timeout-ms)',
      )
        .argParser(parsePositiveInt)
        .default(d.retryBudgetMs),
    )
    .addOption(
      apiKeyOption(
        'require "Authorization: Bearer <key>" on every route but /healthz, and present the same key to the queue',
      ),
    )
    .addOption(firstByteTimeoutOption())
    .addOption(headersTimeoutOption())
    .addOption(requestTimeoutOption())
    .addOption(maxConnectionsOption())
    .addOption(logLevelOption())
    .addHelpText(
      'after',
      [
        '',
        'On start it prints one line to stdout: "leasehold gateway listening on http://<host>:<port>".',
        'Every retry first verifies the lease again; retries stop when it is no longer current (409 stale_lease)',
        'or the budget is spent (502/504 upstream_unavailable). Backoff is exponential with jitter, from 100 ms up to 2 s.',
        '',
        'A send goes to the downstream its "to" names, "receiver" (the --receiver URL, under /effects) by default.',
        'LEASEHOLD_DOWNSTREAMS holds several: name=url,name=url. Each downstream signs with its own secret when',
        'it has one (--downstream-secret NAME=SECRET, else LEASEHOLD_SECRET_<NAME>, upper-cased, - as _), else --secret.',
        SECRETS_IN_VARIABLES,
      ].join('\n'),
    )
    .action(
      serviceAction({
        service: 'gateway',
        renamed: RENAMED,
        resolve: (flags: GatewayFlags, command) => {
          const { receiverUrl, downstreams, receiverSecret } = downstreamsOf(command, flags);
          const options = {
            queueUrl: flags.queue,
            receiverUrl,
            receiverSecret,
            downstreams,
            secret: flags.secret,
            receiverTimeoutMs: flags.receiverTimeoutMs,
            queueTimeoutMs: flags.queueTimeoutMs,
            retryAttempts: flags.retryAttempts,
            retryBudgetMs: flags.retryBudgetMs,
            apiKey: flags.apiKey,
          };
          resolveGatewayOptions(options);
          return { ...options, ...serverLimitsOf(flags), host: flags.host, port: flags.port };
        },
        start: (options, logger) => startGateway({ ...options, logger }),
        ready: (options) => ({
          queue: redactUrl(options.queueUrl),
          receiver: options.receiverUrl === undefined ? undefined : redactUrl(options.receiverUrl),
          downstreams: Object.fromEntries(
            Object.entries(options.downstreams).map(([name, d]) => [name, redactUrl(d.url)]),
          ),
          signed: options.secret !== undefined,
          apiKey: options.apiKey !== undefined,
        }),
        // Sends in flight may be mid-retry: wait up to their budget, then a little more, then exit anyway.
        forceExitMs: (options) => options.retryBudgetMs + 5_000,
      }),
    );
}

const DOWNSTREAMS_VARIABLE = 'LEASEHOLD_DOWNSTREAMS';

/** The library's names for what the flags set, where they differ. */
const RENAMED = { queueUrl: '--queue', receiverUrl: '--receiver', downstreams: '--downstream' };

function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

/**
 * The downstreams and their secrets from --downstream, --downstream-secret and the variables
 * standing in for them: a variable is a comma list (a flag is one entry each, so a secret may
 * hold a comma). A name given twice, or a secret for a downstream not configured, is a usage error.
 */
function downstreamsOf(
  command: Command,
  flags: GatewayFlags,
): {
  receiverUrl: string | undefined;
  receiverSecret: string | undefined;
  downstreams: Record<string, DownstreamOptions>;
} {
  const list = (values: string[]) => values.flatMap((v) => v.split(',')).filter((v) => v !== '');
  const entries = (key: 'downstream' | 'downstreamSecret', values: string[]) =>
    command.getOptionValueSource(key) === 'env' ? list(values) : values;
  // LEASEHOLD_DOWNSTREAMS is the plural the list reads as; LEASEHOLD_DOWNSTREAM, the flag's own, works too.
  const plural = process.env[DOWNSTREAMS_VARIABLE];
  const source = command.getOptionValueSource('downstream');
  if (plural !== undefined && source === 'env') {
    command.error(`error: both LEASEHOLD_DOWNSTREAM and ${DOWNSTREAMS_VARIABLE} are set; set one of them`);
  }
  const fromPlural = plural !== undefined && source !== 'cli';
  const downstreamEntries = fromPlural ? list([plural]) : entries('downstream', flags.downstream);
  // A usage error names where the value came from: the flag, or the variable standing in for it.
  const givenBy = (key: string, flag: string) =>
    command.getOptionValueSource(key) === 'env' ? envVariable(flag) : flag;
  const urlsFrom = fromPlural ? DOWNSTREAMS_VARIABLE : givenBy('downstream', '--downstream');
  const secretsFrom = givenBy('downstreamSecret', '--downstream-secret');
  const named = (flag: string, what: string, values: string[]) => {
    const found = new Map<string, string>();
    for (const text of values) {
      let parsed;
      try {
        parsed = parseNamedValue(text, what);
      } catch (err) {
        return command.error(`error: ${flag}: ${(err as Error).message}`);
      }
      if (found.has(parsed.name))
        command.error(`error: ${flag} names "${parsed.name}" twice; give each downstream once`);
      found.set(parsed.name, parsed.value);
    }
    return found;
  };
  const urls = named(urlsFrom, 'URL', downstreamEntries);
  for (const [name, url] of urls) {
    const label = urlsFrom === '--downstream' ? `--downstream ${name}` : `${name} in ${urlsFrom}`;
    checkOptions(command, {}, () => httpUrl(label, url));
  }
  const secrets = named(secretsFrom, 'SECRET', entries('downstreamSecret', flags.downstreamSecret));
  const receiverGiven = command.getOptionValueSource('receiver') !== 'default';
  if (urls.has(DEFAULT_DOWNSTREAM) && receiverGiven) {
    command.error(
      `error: ${givenBy('receiver', '--receiver')} and ${urlsFrom === '--downstream' ? '--downstream ' : `${urlsFrom}'s `}${DEFAULT_DOWNSTREAM}=URL both name the downstream "${DEFAULT_DOWNSTREAM}"; give one of them`,
    );
  }
  const receiverUrl = urls.has(DEFAULT_DOWNSTREAM) ? undefined : flags.receiver;
  const all = new Set([...(receiverUrl !== undefined ? [DEFAULT_DOWNSTREAM] : []), ...urls.keys()]);
  for (const name of secrets.keys()) {
    if (!all.has(name)) {
      command.error(
        `error: ${secretsFrom} names "${name}", which is not a downstream; the gateway has ${[...all].join(', ')}`,
      );
    }
  }
  // Only main reads the environment: LEASEHOLD_SECRET_<NAME> is looked up here for each downstream.
  const secretOf = (name: string) => {
    const variable = downstreamSecretVariable(name);
    const fromVariable = process.env[variable];
    if (!secrets.has(name) && fromVariable === '') {
      command.error(`error: ${variable} is empty; set a non-empty secret for "${name}", or unset it`);
    }
    return secrets.get(name) ?? fromVariable;
  };
  return {
    receiverUrl,
    receiverSecret: receiverUrl !== undefined ? secretOf(DEFAULT_DOWNSTREAM) : undefined,
    downstreams: Object.fromEntries([...urls].map(([name, url]) => [name, { url, secret: secretOf(name) }])),
  };
}
