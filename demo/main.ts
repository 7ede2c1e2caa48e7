// `leasehold demo` and `leasehold start`: parse flags, run, print. The demo's work is in
// scenario.ts; the services' in start.ts.
import { writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Option, type Command } from 'commander';
import {
  checkOptions,
  flagNamesOf,
  leaseholdCommand,
  logLevelOption,
  parsePort,
  parseWholeNumber,
} from '../platform/flags.js';
import { onParentGone, onStdoutClosed } from '../platform/service-main.js';
import { DEMO_DEFAULTS, resolveDemoOptions } from './options.js';
import { runDemo, type DemoResult } from './scenario.js';
import { renderTimelineHtml } from './timeline-html.js';
import { startServices } from './start.js';
import { formatChecks, formatEntry } from './timeline.js';

export { mailerCommand } from './mailer-main.js';
export { demoWorkerCommand } from './worker-main.js';

/** The CLI this module was built next to: every process the demo starts is `node <it> <command>`. */
const CLI_PATH = fileURLToPath(new URL('../cli/leasehold.js', import.meta.url));

interface DemoFlags {
  jobs: number;
  workers: number;
  leaseMs: number;
  workMs: number;
  seed: number;
  keep: boolean;
  html?: string;
}

export function demoCommand(): Command {
  return leaseholdCommand('demo')
    .description(
      'Run the whole system as separate processes — queue, gateway, receiver, a second downstream (a mailer) and workers — freeze one worker while it holds a lease and kill another mid-job, print the timeline, then check that every job took effect exactly once at each downstream.',
    )
    .addOption(
      new Option('--jobs <n>', 'how many jobs (at least 6)').argParser(parseWholeNumber).default(DEMO_DEFAULTS.jobs),
    )
    .addOption(
      new Option('--workers <n>', 'how many worker processes (at least 3: one frozen, one killed, one carrying on)')
        .argParser(parseWholeNumber)
        .default(DEMO_DEFAULTS.workers),
    )
    .addOption(
      new Option('--lease-ms <ms>', 'the lease each worker asks for (600 to 60000)')
        .argParser(parseWholeNumber)
        .default(DEMO_DEFAULTS.leaseMs),
    )
    .addOption(
      new Option('--work-ms <ms>', 'simulated work per job').argParser(parseWholeNumber).default(DEMO_DEFAULTS.workMs),
    )
    .addOption(
      new Option('--seed <n>', "seed of the jobs' quantities: the same seed gives the same jobs")
        .argParser(parseWholeNumber)
        .default(DEMO_DEFAULTS.seed),
    )
    .option(
      '--keep',
      'keep the temp dir (SQLite files, service logs, timeline.txt, events.jsonl) even when the run passes',
      false,
    )
    .option(
      '--html <file>',
      'where to write the timeline as a picture, a self-contained HTML page (default: <temp dir>.html, beside the temp dir)',
    )
    .addHelpText(
      'after',
      [
        '',
        'Each job sends two effects under its lease: its qty to the receiver and an e-mail (key "email") to the mailer.',
        "Exit code 0 only when every job is done, each effect exactly once per (downstream, job, key), the receiver's",
        "total equals the sum of the jobs' quantities, the frozen worker's two stale sends and its stale finish were",
        "refused (409 stale_lease) and the killed worker's job was done by another worker. Otherwise 1, with the",
        'reasons; the temp dir is then kept.',
        'Ctrl-C stops every process it started.',
      ].join('\n'),
    )
    .action(async (flags: DemoFlags, command: Command) => {
      const options = checkOptions(command, flagNamesOf(command), () =>
        resolveDemoOptions({ cliPath: CLI_PATH, ...flags }),
      );
      const interrupt = new AbortController();
      const onSignal = () => {
        if (interrupt.signal.aborted) process.exit(130);
        process.stdout.write('\ninterrupted: stopping every process...\n');
        interrupt.abort();
      };
      process.on('SIGINT', onSignal);
      process.on('SIGTERM', onSignal);
      // The reader went away (`leasehold demo | head`): stop every process as Ctrl-C does, and say
      // on stderr where the files are, since stdout reaches nobody now.
      let stdoutClosed = false;
      onStdoutClosed(() => {
        stdoutClosed = true;
        process.stderr.write('leasehold demo: stdout closed: stopping every process\n');
        interrupt.abort();
      });
      process.stdout.write(
        [
          `leasehold demo: the queue, the gateway, the receiver, a mailer and ${options.workers} workers, each its own process.`,
          'Each job sends two effects under its lease: its qty to the receiver and an e-mail to the mailer.',
          'w1 is frozen (SIGSTOP) twice while it holds a lease — right before its sends, then right before it finishes —',
          'and resumed once another worker has taken its job over; another worker is killed (SIGKILL) mid-job.',
          'Whatever the stale worker does after waking must be refused, and every job must take effect exactly once.',
          '',
        ].join('\n'),
      );
      const result = await runDemo({
        ...options,
        signal: interrupt.signal,
        onEntry: (entry) => process.stdout.write(`${formatEntry(entry)}\n`),
      });
      const html = writeTimelinePage(result, flags.html);
      process.stdout.write(`${verdictText(result).join('\n')}\n`);
      if (html) process.stdout.write(`the timeline as a picture: ${html}\n`);
      if (stdoutClosed && result.kept) process.stderr.write(`leasehold demo: files kept in ${result.dir}\n`);
      process.exit(result.ok ? 0 : interrupt.signal.aborted ? 130 : 1);
    });
}

export function verdictText(result: DemoResult): string[] {
  const seconds = (result.durationMs / 1000).toFixed(1);
  const lines = [
    '',
    "verdict (from the queue's /stats and /jobs, the receiver's /totals, /effects and /journal, the mailer's /effects, /journal and /outbox):",
    ...formatChecks(result.checks),
    '',
  ];
  if (result.ok) {
    const total = result.final!.totals.qty;
    lines.push(
      `PASS in ${seconds} s: ${result.jobs.length} jobs done, each effect exactly once at the receiver and at the mailer; the receiver's total ${total} equals the jobs' ${total};`,
      "the frozen worker's stale sends to both and its stale finish were refused, and the killed worker's job was done by another.",
    );
  } else {
    lines.push(`FAIL after ${seconds} s:`, ...result.reasons.map((r) => `  - ${r}`));
  }
  if (result.kept) lines.push(`files kept in ${result.dir}`);
  return lines;
}

/** The page is written even for a failed run: that is when the picture helps most. */
function writeTimelinePage(result: DemoResult, file: string | undefined): string | undefined {
  const path = resolve(file ?? `${result.dir}.html`);
  try {
    writeFileSync(path, renderTimelineHtml(result));
    return path;
  } catch (err) {
    process.stderr.write(`leasehold demo: could not write the timeline page ${path}: ${(err as Error).message}\n`);
    return undefined;
  }
}

/** How often `leasehold start` checks that the process that started it is still there. */
const PARENT_POLL_MS = 500;

interface StartFlags {
  queuePort: number;
  gatewayPort: number;
  receiverPort: number;
  host: string;
  data: string;
  logLevel: string;
}

export function startCommand(): Command {
  return leaseholdCommand('start')
    .description('Run the queue, the gateway and the receiver together in the foreground until Ctrl-C.')
    .addOption(new Option('--queue-port <port>', "the queue's port").argParser(parsePort).default(4100))
    .addOption(new Option('--gateway-port <port>', "the gateway's port").argParser(parsePort).default(4200))
    .addOption(new Option('--receiver-port <port>', "the receiver's port").argParser(parsePort).default(4300))
    .option('--host <host>', 'address the three bind to', '127.0.0.1')
    .option('--data <dir>', 'folder for queue.sqlite and receiver.sqlite (created if missing)', './data')
    .addOption(logLevelOption("the services' log level (JSON lines on stderr)"))
    .addHelpText(
      'after',
      '\nLEASEHOLD_SECRET, when set, is passed on: the gateway signs what it forwards and the receiver checks it.',
    )
    .action(async (flags: StartFlags) => {
      let running;
      try {
        running = await startServices({
          cliPath: CLI_PATH,
          host: flags.host,
          ports: { queue: flags.queuePort, gateway: flags.gatewayPort, receiver: flags.receiverPort },
          dataDir: flags.data,
          logLevel: flags.logLevel,
        });
      } catch (err) {
        process.stderr.write(`leasehold start: ${(err as Error).message}\n`);
        process.exit(1);
      }
      const { urls } = running;
      process.stdout.write(
        [
          `leasehold queue    ${urls.queue}`,
          `leasehold gateway  ${urls.gateway}`,
          `leasehold receiver ${urls.receiver}`,
          `data in ${flags.data}; Ctrl-C stops all three`,
          '',
        ].join('\n'),
      );
      let stopping = false;
      const stop = (code: number) => {
        if (stopping) process.exit(1);
        stopping = true;
        process.stdout.write('stopping: gateway first, then queue and receiver...\n');
        running.stop().then(
          () => {
            process.stdout.write('stopped\n');
            process.exit(code);
          },
          () => process.exit(1),
        );
      };
      // SIGHUP: the terminal closed. npm forwards SIGTERM to the shell it runs this under, which
      // exits without passing it on: this process is then re-parented, and stops all the same.
      for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => stop(0));
      onParentGone(() => stop(0), { reparented: { pollMs: PARENT_POLL_MS } });
      void running.exited.then((why) => {
        process.stderr.write(`leasehold start: ${why}\n`);
        stop(1);
      });
    });
}
