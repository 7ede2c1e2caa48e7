// `leasehold receiver`: parse flags, start the receiver, print the URL it listens on, and stop
// cleanly on SIGTERM/SIGINT. The only receiver module that touches `process`.
import { Command, InvalidArgumentError, Option } from 'commander';
import { pino } from 'pino';
import { onShutdown } from '../platform/listen.js';
import { startReceiver, type ReceiverHandle } from './service.js';

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];
/** How long a shutdown may take before the process exits anyway. */
const FORCE_EXIT_MS = 10_000;

interface ReceiverFlags {
  port: number;
  host: string;
  db: string;
  secret?: string;
  testMode: boolean;
  logLevel: string;
}

function parsePort(value: string): number {
  const port = Number(value);
  if (!/^\d+$/.test(value) || port > 65_535) throw new InvalidArgumentError('expected an integer from 0 to 65535.');
  return port;
}

export function receiverCommand(): Command {
  return new Command('receiver')
    .description("Start the idempotent, fencing receiver: it records each job's effect once and rejects lower fencing tokens.")
    .addOption(new Option('--port <port>', 'TCP port to listen on; 0 picks a free port').argParser(parsePort).default(4300))
    .option('--host <host>', 'address to bind to', '127.0.0.1')
    .addOption(
      new Option(
        '--db <path-or-url>',
        'SQLite file for effects and the journal; its parent directory is created if missing (":memory:" keeps nothing). ' +
          'Or a postgres:// URL, shared by several receivers; add ?schema=NAME to use that schema (created if missing)',
      )
        .env('DATABASE_URL')
        .default('./data/receiver.sqlite'),
    )
    .addOption(
      new Option('--secret <secret>', 'shared secret: POST /effects then needs a valid Leasehold-Signature header').env(
        'LEASEHOLD_SECRET',
      ),
    )
    .option('--test-mode', 'enable fault injection with POST /admin/faults and POST /admin/reset (for integration tests)', false)
    .addOption(new Option('--log-level <level>', 'level of the JSON logs written to stderr').choices(LOG_LEVELS).default('info'))
    .addHelpText(
      'after',
      '\nOn start it prints one line to stdout: "leasehold receiver listening on http://<host>:<port>".\n' +
        'Prefer LEASEHOLD_SECRET to --secret: command lines are visible to other users of the machine.',
    )
    .action(async (flags: ReceiverFlags, command: Command) => {
      if (flags.secret === '') command.error('error: the secret is empty; set a non-empty --secret or LEASEHOLD_SECRET, or unset it.');
      await runReceiver(flags);
    });
}

async function runReceiver(flags: ReceiverFlags): Promise<void> {
  // Synchronous stderr writes: nothing logged is lost when the process exits right after.
  const logger = pino({ name: 'leasehold-receiver', level: flags.logLevel }, pino.destination({ dest: 2, sync: true }));
  let handle: ReceiverHandle;
  try {
    handle = await startReceiver({
      port: flags.port,
      host: flags.host,
      db: flags.db,
      secret: flags.secret,
      testMode: flags.testMode,
      logger,
    });
  } catch (err) {
    logger.fatal({ err }, 'receiver could not start');
    process.exitCode = 1;
    return;
  }
  process.stdout.write(`leasehold receiver listening on ${handle.url}\n`);

  onShutdown(() => handle.close(), logger, FORCE_EXIT_MS);
}
