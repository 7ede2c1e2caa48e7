// `leasehold queue`: parse flags, start the service, print its URL, stop cleanly on a signal.
import { Option, type Command } from 'commander';
import { redactDb } from '../platform/postgres.js';
import {
  apiKeyOption,
  checkOptions,
  flagNamesOf,
  dbOption,
  failStart,
  firstByteTimeoutOption,
  headersTimeoutOption,
  integerAtLeast,
  journalOption,
  leaseholdCommand,
  logLevelOption,
  maxConnectionsOption,
  oneOf,
  portOption,
  requestTimeoutOption,
  SECRETS_IN_VARIABLES,
} from '../platform/flags.js';
import type { SqliteJournal } from '../platform/sqlite.js';
import { checkApiKey } from '../platform/exchange.js';
import { onShutdown, resolveListenOptions, serverLimitsOf } from '../platform/listen.js';
import { createLogger } from '../platform/logger.js';
import { startQueue, type QueueService } from './service.js';
import type { LateFinishPolicy } from './types.js';

const LATE_FINISH: readonly LateFinishPolicy[] = ['reject', 'if-unclaimed'];

interface QueueFlags {
  port: number;
  host: string;
  db: string;
  lateFinish: LateFinishPolicy;
  journal: SqliteJournal;
  commitWindowMs: number;
  apiKey?: string;
  firstByteTimeoutMs?: number;
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  maxConnections: number;
  logLevel: string;
}

export function queueCommand(): Command {
  return leaseholdCommand('queue')
    .description('Run the job queue service: fenced leases over SQLite or PostgreSQL.')
    .addOption(portOption(4100))
    .option('--host <host>', 'interface to bind', '127.0.0.1')
    .addOption(
      dbOption(
        './data/queue.sqlite',
        'SQLite database file (created with its folder if missing), or a postgres:// URL; ' +
          'add ?schema=NAME to the URL to keep the tables in that schema (created if missing)',
      ),
    )
    .addOption(
      new Option(
        '--late-finish <policy>',
        'whether the current token may finish after its lease expired, if nobody claimed since',
      )
        .choices(LATE_FINISH)
        .argParser(oneOf(LATE_FINISH))
        .default('reject'),
    )
    .addOption(journalOption())
    .addOption(
      new Option(
        '--commit-window-ms <ms>',
        'SQLite: how long a transaction may wait for writes known to be coming, to share their commit (0: never)',
      )
        .argParser(integerAtLeast(0))
        .default(2),
    )
    .addOption(
      apiKeyOption('require "Authorization: Bearer <key>" on every route but /healthz (the job listing shows tokens)'),
    )
    .addOption(firstByteTimeoutOption())
    .addOption(headersTimeoutOption())
    .addOption(requestTimeoutOption())
    .addOption(maxConnectionsOption())
    .addOption(logLevelOption())
    .addHelpText(
      'after',
      `\nOn start it prints one line to stdout: "leasehold queue listening on http://<host>:<port>".\n${SECRETS_IN_VARIABLES}`,
    )
    .action(async (flags: QueueFlags, command: Command) => {
      checkOptions(command, flagNamesOf(command), () => {
        if (flags.apiKey !== undefined) checkApiKey(flags.apiKey);
        return resolveListenOptions(flags);
      });
      await runQueue(flags);
    });
}

async function runQueue(flags: QueueFlags): Promise<void> {
  const logger = createLogger({ service: 'queue', level: flags.logLevel });
  let service: QueueService;
  try {
    service = await startQueue({
      db: flags.db,
      host: flags.host,
      port: flags.port,
      latePolicy: flags.lateFinish,
      journal: flags.journal,
      commitWindowMs: flags.commitWindowMs,
      apiKey: flags.apiKey,
      ...serverLimitsOf(flags),
      logger,
    });
  } catch (err) {
    failStart('queue', err, { port: flags.port, logger });
  }
  logger.info(
    {
      url: service.url,
      db: redactDb(flags.db),
      lateFinish: flags.lateFinish,
      journal: flags.journal,
      apiKey: flags.apiKey !== undefined,
    },
    'queue ready',
  );
  process.stdout.write(`leasehold queue listening on ${service.url}\n`);
  onShutdown(service.close, logger);
}
