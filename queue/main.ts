// `leasehold queue`: its flags; starting, printing the URL and stopping are platform/service-main.ts's.
import { Option, type Command } from 'commander';
import {
  apiKeyOption,
  dbOption,
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
import { serverLimitsOf } from '../platform/listen.js';
import { isPostgresUrl } from '../platform/postgres.js';
import { serviceAction } from '../platform/service-main.js';
import { startQueue } from './service.js';
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
    .action(
      serviceAction({
        service: 'queue',
        resolve: (flags: QueueFlags) => ({
          db: flags.db,
          host: flags.host,
          port: flags.port,
          latePolicy: flags.lateFinish,
          journal: flags.journal,
          commitWindowMs: flags.commitWindowMs,
          apiKey: flags.apiKey === undefined ? undefined : checkApiKey(flags.apiKey),
          ...serverLimitsOf(flags),
        }),
        start: (options, logger) => startQueue({ ...options, logger }),
        ready: (options) => ({
          lateFinish: options.latePolicy,
          // SQLite's journal mode: a postgres:// database has none of its own to report.
          ...(isPostgresUrl(options.db) ? {} : { journal: options.journal }),
          apiKey: options.apiKey !== undefined,
        }),
      }),
    );
}
