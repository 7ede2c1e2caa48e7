// `leasehold receiver`: its flags; starting, printing the URL and stopping are
// platform/service-main.ts's.
import { Option, type Command } from 'commander';
import {
  dbOption,
  firstByteTimeoutOption,
  headersTimeoutOption,
  journalOption,
  leaseholdCommand,
  logLevelOption,
  maxConnectionsOption,
  parseDuration,
  portOption,
  requestTimeoutOption,
} from '../platform/flags.js';
import type { SqliteJournal } from '../platform/sqlite.js';
import { serverLimitsOf } from '../platform/listen.js';
import { serviceAction } from '../platform/service-main.js';
import { startReceiver } from './service.js';

interface ReceiverFlags {
  port: number;
  host: string;
  db: string;
  secret?: string;
  testMode: boolean;
  journal: SqliteJournal;
  retainJournal?: number | 'keep';
  firstByteTimeoutMs?: number;
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  maxConnections: number;
  logLevel: string;
}

export function receiverCommand(): Command {
  return leaseholdCommand('receiver')
    .description(
      "Start the idempotent, fencing receiver: it records each job's effect once and rejects lower fencing tokens.",
    )
    .addOption(portOption(4300))
    .option('--host <host>', 'address to bind to', '127.0.0.1')
    .addOption(
      dbOption(
        './data/receiver.sqlite',
        'SQLite file for effects and the journal; its parent directory is created if missing (":memory:" keeps nothing). ' +
          'Or a postgres:// URL, shared by several receivers; add ?schema=NAME to use that schema (created if missing)',
      ),
    )
    .addOption(
      new Option('--secret <secret>', 'shared secret: POST /effects then needs a valid Leasehold-Signature header'),
    )
    .option(
      '--test-mode',
      'enable fault injection with POST /admin/faults and POST /admin/reset (for integration tests)',
      false,
    )
    .addOption(journalOption())
    .addOption(
      new Option(
        '--retain-journal <duration>',
        'delete journal entries older than this (7d, 12h, 30m, 90s, or milliseconds), at start and periodically; ' +
          '"keep" keeps the whole journal; effects and highest tokens are always kept (default: 30d, keep for :memory:)',
      ).argParser((value: string) => (value === 'keep' ? 'keep' : parseDuration(value))),
    )
    .addOption(firstByteTimeoutOption())
    .addOption(headersTimeoutOption())
    .addOption(requestTimeoutOption())
    .addOption(maxConnectionsOption())
    .addOption(logLevelOption())
    .addHelpText(
      'after',
      '\nOn start it prints one line to stdout: "leasehold receiver listening on http://<host>:<port>".\n' +
        'Prefer LEASEHOLD_SECRET to --secret: command lines are visible to other users of the machine.',
    )
    .action(
      serviceAction({
        service: 'receiver',
        resolve: (flags: ReceiverFlags) => ({
          port: flags.port,
          host: flags.host,
          db: flags.db,
          secret: flags.secret,
          testMode: flags.testMode,
          journal: flags.journal,
          retainJournalMs: flags.retainJournal,
          ...serverLimitsOf(flags),
        }),
        start: (options, logger) => startReceiver({ ...options, logger }),
        ready: (options) => ({ testMode: options.testMode, signed: options.secret !== undefined }),
      }),
    );
}
