// `leasehold audit`: read the queue and the receiver, print what was checked and every
// violation, exit 0 when clean, 1 on any violation (or when a side cannot be read), 2 on a usage error.
import { Option, type Command } from 'commander';
import {
  apiKeyOption,
  checkOptions,
  integerAtLeast,
  leaseholdCommand,
  SECRETS_IN_VARIABLES,
} from '../platform/flags.js';
import { httpUrl } from '../platform/url.js';
import { audit, formatAudit } from './index.js';

interface AuditFlags {
  queue: string;
  receiver: string;
  apiKey?: string;
  timeoutMs: number;
  json: boolean;
}

export function auditCommand(): Command {
  return leaseholdCommand('audit')
    .description(
      "Check end to end that effects happened exactly once: every done job in the queue has exactly one effect with its qty in the receiver, no effect belongs to an unknown job or carries a token above its job's, and the receiver's totals agree with its effects.",
    )
    .option('--queue <url>', "the queue's base URL", 'http://127.0.0.1:4100')
    .option('--receiver <url>', "the receiver's base URL", 'http://127.0.0.1:4300')
    .addOption(apiKeyOption("the queue's API key, when it was started with one"))
    .addOption(
      new Option('--timeout-ms <ms>', 'how long each request may take').argParser(integerAtLeast(1)).default(10_000),
    )
    .option('--json', 'print the report as one JSON object instead of lines', false)
    .addHelpText(
      'after',
      [
        '',
        "Prints what it checked, then each violation with the job and both sides' values, then ok or FAIL.",
        'Exit code 0 when every rule holds, 1 on any violation or when a service cannot be read, 2 on a usage error.',
        'Run it on a quiet system (after a test run, or with the workers stopped): a job finished while it reads',
        'may be seen done before its effect is.',
        SECRETS_IN_VARIABLES,
      ].join('\n'),
    )
    .action(async (flags: AuditFlags, command: Command) => {
      checkOptions(command, {}, () => {
        httpUrl('--queue', flags.queue);
        httpUrl('--receiver', flags.receiver);
      });
      let report;
      try {
        report = await audit({
          queue: flags.queue,
          receiver: flags.receiver,
          apiKey: flags.apiKey,
          timeoutMs: flags.timeoutMs,
        });
      } catch (err) {
        process.stderr.write(`leasehold audit: could not read both sides: ${(err as Error).message}\n`);
        process.exit(1);
      }
      process.stdout.write(flags.json ? `${JSON.stringify(report)}\n` : `${formatAudit(report).join('\n')}\n`);
      process.exit(report.ok ? 0 : 1);
    });
}
