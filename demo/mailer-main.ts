// `leasehold demo-mailer`: the demo's second downstream as its own process: flags, start, print
// the URL, stop on SIGTERM/SIGINT or when the process that started it is gone.
import { Option, type Command } from 'commander';
import { pino } from 'pino';
import { failStart, leaseholdCommand, logLevelOption, portOption } from '../platform/flags.js';
import { onShutdown } from '../platform/service-main.js';
import { startMailer } from './mailer.js';

interface MailerFlags {
  port: number;
  host: string;
  db: string;
  secret?: string;
  logLevel: string;
}

export function mailerCommand(): Command {
  return leaseholdCommand('demo-mailer')
    .description(
      "Start the demo's mailer: a downstream built on fencedEffects that writes each effect it applies (an e-mail: body {to, subject}) to its outbox table in the same transaction, once per job and key, refusing lower fencing tokens.",
    )
    .addOption(portOption(4400))
    .option('--host <host>', 'address to bind to', '127.0.0.1')
    .option(
      '--db <path>',
      'SQLite file for its effects, journal and outbox (":memory:" keeps nothing)',
      './data/mailer.sqlite',
    )
    .addOption(
      new Option('--secret <secret>', 'shared secret: POST /effects then needs a valid Leasehold-Signature header'),
    )
    .addOption(logLevelOption())
    .addHelpText(
      'after',
      [
        '',
        'On start it prints one line to stdout: "leasehold demo-mailer listening on http://<host>:<port>".',
        'Routes: POST /effects (the downstream protocol, docs/downstream-protocol.md); GET /effects and GET /journal,',
        "paged as the receiver's are (what leasehold audit --downstream reads); GET /totals; GET /outbox (the mails).",
        'Give it to the gateway as --downstream mailer=http://<host>:<port>/effects.',
        'Prefer LEASEHOLD_SECRET to --secret: command lines are visible to other users of the machine.',
      ].join('\n'),
    )
    .action(async (flags: MailerFlags, command: Command) => {
      if (flags.secret === '')
        command.error('error: the secret is empty; set a non-empty --secret or LEASEHOLD_SECRET, or unset it.');
      const logger = pino(
        { level: flags.logLevel, base: { service: 'mailer', pid: process.pid } },
        pino.destination({ dest: 2, sync: true }),
      );
      let mailer;
      try {
        mailer = await startMailer({
          db: flags.db,
          host: flags.host,
          port: flags.port,
          logger,
          ...(flags.secret === undefined ? {} : { secret: flags.secret }),
        });
      } catch (err) {
        failStart('demo-mailer', err, { port: flags.port, logger });
      }
      logger.info({ url: mailer.url, db: flags.db, signed: flags.secret !== undefined }, 'mailer ready');
      onShutdown(() => mailer.close(), logger);
      process.stdout.write(`leasehold demo-mailer listening on ${mailer.url}\n`);
    });
}
