// `leasehold conform <url>`: run the conformance cases against a live downstream, one line per
// case as it ends, `N passed, M failed` last (`, K not run` when a request timed out, which ends
// the run); exit 0 when every case passed, 1 on a failure, 2 on a usage error.
import { Argument, Option, type Command } from 'commander';
import { checkOptions, integerAtLeast, leaseholdCommand } from '../platform/flags.js';
import { onStdoutClosed } from '../platform/service-main.js';
import { httpUrl } from '../platform/url.js';
import { CONFORM_DEFAULTS, conform, formatCase, formatSummary } from './index.js';

interface ConformFlags {
  secret?: string;
  races: number;
  timeoutMs: number;
}

export function conformCommand(): Command {
  return leaseholdCommand('conform')
    .description(
      "Check that a live downstream keeps the fencing protocol (docs/downstream-protocol.md): applied then duplicate, lower tokens fenced across the job's keys, changed qty or body a conflict, one applied out of racing requests, bad input refused with nothing recorded, and with --secret every bad signature refused.",
    )
    .addArgument(
      new Argument('<url>', "the downstream's effect endpoint, path included (http://127.0.0.1:4300/effects)"),
    )
    .addOption(
      new Option(
        '--secret <secret>',
        "the downstream's secret: sign every request, and check bad signatures are refused",
      ),
    )
    .addOption(
      new Option('--races <n>', 'identical requests sent at once in the race case (2 to 64)')
        .argParser(integerAtLeast(2))
        .default(CONFORM_DEFAULTS.races),
    )
    .addOption(
      new Option('--timeout-ms <ms>', 'how long each request may take; one that takes longer ends the run')
        .argParser(integerAtLeast(1))
        .default(CONFORM_DEFAULTS.timeoutMs),
    )
    .addHelpText(
      'after',
      [
        '',
        'Every run uses job ids of its own (conform-<time>-<random>-<case>), so it can be pointed at a service in use;',
        'it leaves those effects behind. Prints one line per case (ok, FAIL with what was expected and what came, or',
        'skip), then "N passed, M failed". A request not answered within --timeout-ms fails its case and ends the',
        'run: the cases after it are skipped as not run, and the last line adds ", K not run". Exit code 0 when every',
        'case passed, 1 on a failure or when the downstream cannot be reached, 2 on a usage error. Prefer',
        'LEASEHOLD_SECRET to --secret: command lines are visible to other users of the machine.',
      ].join('\n'),
    )
    .action(async (url: string, flags: ConformFlags, command: Command) => {
      if (flags.secret === '') command.error('error: the secret is empty; set a non-empty --secret, or unset it.');
      checkOptions(command, { races: '--races' }, () => {
        httpUrl('<url>', url);
        if (flags.races > 64) throw new RangeError(`races must be at most 64, not ${flags.races}.`);
      });
      // The reader went away (`leasehold conform URL | head`): the rest of the report reaches nobody.
      onStdoutClosed(() => process.exit(1));
      const report = await conform({
        url,
        secret: flags.secret,
        races: flags.races,
        timeoutMs: flags.timeoutMs,
        onCase: (result) => process.stdout.write(`${formatCase(result)}\n`),
      });
      process.stdout.write(`${formatSummary(report)}\n`);
      process.exit(report.failed === 0 ? 0 : 1);
    });
}
