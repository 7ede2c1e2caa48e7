// `leasehold gateway`: parse flags, start the gateway, print its URL, stop cleanly on a signal.
// The only gateway module that touches `process`.
import { Option, type Command } from 'commander';
import {
  apiKeyOption,
  checkOptions,
  flagNamesOf,
  failStart,
  headersTimeoutOption,
  leaseholdCommand,
  logLevelOption,
  maxConnectionsOption,
  parsePositiveInt,
  portOption,
  requestTimeoutOption,
  SECRETS_IN_VARIABLES,
} from '../platform/flags.js';
import { onShutdown, resolveListenOptions, serverLimitsOf } from '../platform/listen.js';
import { createLogger } from '../platform/logger.js';
import { GATEWAY_DEFAULTS, resolveGatewayOptions } from './options.js';
import { startGateway, type GatewayService } from './service.js';

interface GatewayFlags {
  port: number;
  host: string;
  queue: string;
  receiver: string;
  secret?: string;
  receiverTimeoutMs: number;
  queueTimeoutMs: number;
  retryAttempts: number;
  retryBudgetMs: number;
  apiKey?: string;
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
    .addOption(new Option('--secret <secret>', 'shared secret: sign every forwarded request with Leasehold-Signature'))
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
        SECRETS_IN_VARIABLES,
      ].join('\n'),
    )
    .action(async (flags: GatewayFlags, command: Command) => {
      if (flags.secret === '')
        command.error('error: the secret is empty; set a non-empty --secret or LEASEHOLD_SECRET, or unset it.');
      const options = {
        queueUrl: flags.queue,
        receiverUrl: flags.receiver,
        secret: flags.secret,
        receiverTimeoutMs: flags.receiverTimeoutMs,
        queueTimeoutMs: flags.queueTimeoutMs,
        retryAttempts: flags.retryAttempts,
        retryBudgetMs: flags.retryBudgetMs,
        apiKey: flags.apiKey,
      };
      checkOptions(command, flagNamesOf(command, { queueUrl: '--queue', receiverUrl: '--receiver' }), () =>
        resolveGatewayOptions(options),
      );
      const limits = serverLimitsOf(flags);
      checkOptions(command, flagNamesOf(command, { queueUrl: '--queue', receiverUrl: '--receiver' }), () =>
        resolveListenOptions(limits),
      );
      await runGateway({ ...options, ...limits, host: flags.host, port: flags.port }, flags.logLevel);
    });
}

async function runGateway(options: Parameters<typeof startGateway>[0], logLevel: string): Promise<void> {
  const logger = createLogger({ service: 'gateway', level: logLevel });
  let service: GatewayService;
  try {
    service = await startGateway({ ...options, logger });
  } catch (err) {
    failStart('gateway', err, { port: options.port, logger });
  }
  logger.info(
    {
      url: service.url,
      queue: options.queueUrl,
      receiver: options.receiverUrl,
      signed: options.secret !== undefined,
      apiKey: options.apiKey !== undefined,
    },
    'gateway ready',
  );
  process.stdout.write(`leasehold gateway listening on ${service.url}\n`);

  // Sends in flight may be mid-retry: wait up to their budget, then a little more, then exit anyway.
  onShutdown(service.close, logger, (options.retryBudgetMs ?? GATEWAY_DEFAULTS.retryBudgetMs) + 5_000);
}
