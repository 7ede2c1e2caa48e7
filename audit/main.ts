// `leasehold audit`: read the queue, the receiver and each other downstream, print what was
// checked and every violation, exit 0 when clean, 1 on any violation (or when a side cannot be read), 2 on a usage error.
import { Option, type Command } from 'commander';
import {
  apiKeyOption,
  checkOptions,
  integerAtLeast,
  leaseholdCommand,
  SECRETS_IN_VARIABLES,
} from '../platform/flags.js';
import { httpUrl } from '../platform/url.js';
import { audit, formatAudit, listingBase, type AuditDownstream } from './index.js';

interface AuditFlags {
  queue: string;
  receiver: string;
  downstream: string[];
  expect: string[];
  apiKey?: string;
  timeoutMs: number;
  json: boolean;
}

export function auditCommand(): Command {
  return leaseholdCommand('audit')
    .description(
      "Check end to end that effects happened exactly once: every done job in the queue has exactly one effect with its qty in the receiver (and each expected key at each other downstream), no effect is doubled, belongs to an unknown job or carries a token above its job's, and the receiver's totals agree with its effects.",
    )
    .option('--queue <url>', "the queue's base URL", 'http://127.0.0.1:4100')
    .option('--receiver <url>', "the receiver's base URL", 'http://127.0.0.1:4300')
    .addOption(
      new Option(
        '--downstream <name=url>',
        "another downstream to audit: its effect endpoint as the gateway has it, ending in /effects; its effects are listed with GET there, as the receiver's are (repeatable; or LEASEHOLD_DOWNSTREAMS=name=url,name=url)",
      )
        .argParser(collect)
        .default([], 'none'),
    )
    .addOption(
      new Option(
        '--expect <name=key>',
        'every done job must have the effect with this key at that downstream (repeatable; the receiver always expects the default effect)',
      )
        .argParser(collect)
        .default([], 'none'),
    )
    .addOption(apiKeyOption("the queue's API key, when it was started with one"))
    .addOption(
      new Option('--timeout-ms <ms>', 'how long each request may take').argParser(integerAtLeast(1)).default(10_000),
    )
    .option('--json', 'print the report as one JSON object instead of lines', false)
    .addHelpText(
      'after',
      [
        '',
        "Prints what it checked and each downstream's effects by key, then each violation with the downstream, the",
        "job, the key and both sides' values, then ok or FAIL. An effect applied with a token below the one its job",
        "finished with (an earlier holder sent it; the finisher's send was a duplicate) is a note, not a violation.",
        'A downstream must list its effects as the receiver does: GET <base>/effects?limit=&after= answering',
        '{effects: [{jobId, key?, qty?, token}], next}. Example:',
        '  leasehold audit --receiver http://127.0.0.1:4300 --downstream mailer=http://127.0.0.1:4400/effects --expect mailer=email',
        'Exit code 0 when every rule holds, 1 on any violation or when a service cannot be read, 2 on a usage error.',
        'Run it on a quiet system (after a test run, or with the workers stopped): a job finished while it reads',
        'may be seen done before its effect is.',
        SECRETS_IN_VARIABLES,
      ].join('\n'),
    )
    .action(async (flags: AuditFlags, command: Command) => {
      const { downstreams, receiverKeys } = checkOptions(command, {}, () => {
        httpUrl('--queue', flags.queue);
        httpUrl('--receiver', flags.receiver);
        return downstreamsOf(command, flags);
      });
      let report;
      try {
        report = await audit({
          queue: flags.queue,
          receiver: flags.receiver,
          downstreams,
          receiverKeys,
          apiKey: flags.apiKey,
          timeoutMs: flags.timeoutMs,
        });
      } catch (err) {
        process.stderr.write(`leasehold audit: could not read every side: ${(err as Error).message}\n`);
        process.exit(1);
      }
      process.stdout.write(flags.json ? `${JSON.stringify(report)}\n` : `${formatAudit(report).join('\n')}\n`);
      process.exit(report.ok ? 0 : 1);
    });
}

function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

/** `NAME=VALUE`: the name before the first `=`, the value after it. */
function named(flag: string, text: string): [string, string] {
  const eq = text.indexOf('=');
  if (eq <= 0 || eq === text.length - 1)
    throw new RangeError(`${flag} must be NAME=VALUE, not ${JSON.stringify(text)}`);
  return [text.slice(0, eq), text.slice(eq + 1)];
}

/** The downstreams of --downstream (or LEASEHOLD_DOWNSTREAMS, a comma list) and the keys --expect names for each. */
function downstreamsOf(
  command: Command,
  flags: AuditFlags,
): { downstreams: AuditDownstream[]; receiverKeys: Array<string | null> } {
  const plural = process.env.LEASEHOLD_DOWNSTREAMS;
  const fromEnv = command.getOptionValueSource('downstream') !== 'cli';
  const entries =
    fromEnv && plural !== undefined
      ? plural.split(',').filter((v) => v !== '')
      : command.getOptionValueSource('downstream') === 'env'
        ? flags.downstream.flatMap((v) => v.split(',')).filter((v) => v !== '')
        : flags.downstream;
  const urls = new Map<string, string>();
  for (const text of entries) {
    const [name, url] = named('--downstream', text);
    if (urls.has(name)) throw new RangeError(`--downstream names "${name}" twice; give each downstream once`);
    listingBase(name, url);
    urls.set(name, url);
  }
  const keys = new Map<string, string[]>();
  for (const text of flags.expect) {
    const [name, key] = named('--expect', text);
    if (name !== 'receiver' && !urls.has(name)) {
      throw new RangeError(
        `--expect names "${name}", which is not a downstream given with --downstream (${urls.size > 0 ? [...urls.keys()].join(', ') : 'none is'})`,
      );
    }
    keys.set(name, [...(keys.get(name) ?? []), key]);
  }
  return {
    downstreams: [...urls].map(([name, url]) => ({ name, url, keys: keys.get(name) ?? [] })),
    receiverKeys: [null, ...(keys.get('receiver') ?? [])],
  };
}
