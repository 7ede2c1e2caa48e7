// `leasehold queue`: parse flags, start the service, print its URL, stop cleanly on a signal.
import { Command, Option } from 'commander';
import pino from 'pino';
import { redactDb } from '../platform/postgres.js';
import { onShutdown } from '../platform/listen.js';
import { startQueue } from './service.js';
import type { LateFinishPolicy } from './types.js';

export function parsePort(value: string): number {
  const port = Number(value);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new Error(`--port must be an integer from 0 to 65535, got "${value}"`);
  }
  return port;
}

export function queueCommand(): Command {
  return new Command('queue')
    .description('Run the job queue service: fenced leases over SQLite or PostgreSQL.')
    .option('--port <port>', 'TCP port; 0 picks a free one and prints it', parsePort, 4100)
    .option('--host <host>', 'interface to bind', '127.0.0.1')
    .addOption(
      new Option(
        '--db <path-or-url>',
        'SQLite database file (created with its folder if missing), or a postgres:// URL; ' +
          'add ?schema=NAME to the URL to keep the tables in that schema (created if missing)',
      )
        .env('DATABASE_URL')
        .default('./data/queue.sqlite'),
    )
    .addOption(
      new Option('--late-finish <policy>', 'whether the current token may finish after its lease expired, if nobody claimed since')
        .choices(['reject', 'if-unclaimed'])
        .default('reject'),
    )
    .addOption(
      new Option('--log-level <level>', 'log level (logs are JSON lines on stderr)')
        .choices(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
        .default(process.env.LEASEHOLD_LOG_LEVEL ?? 'info'),
    )
    .action(async (opts: { port: number; host: string; db: string; lateFinish: LateFinishPolicy; logLevel: string }) => {
      const logger = pino({ name: 'queue', level: opts.logLevel }, pino.destination(2));
      const service = await startQueue({
        db: opts.db,
        host: opts.host,
        port: opts.port,
        latePolicy: opts.lateFinish,
        logger,
      });
      logger.info({ url: service.url, db: redactDb(opts.db), lateFinish: opts.lateFinish }, 'queue ready');
      process.stdout.write(`leasehold queue listening on ${service.url}\n`);
      onShutdown(service.close, logger);
    });
}
