// `leasehold worker`: a worker process whose handler sends each job's qty through the gateway,
// after optional simulated work. Every event is one JSON line on stdout; logs go to stderr.
import { setTimeout as sleep } from 'node:timers/promises';
import { hostname } from 'node:os';
import { InvalidArgumentError, Option, type Command } from 'commander';
import { checkOptions, integerAtLeast, leaseholdCommand, logLevelOption } from '../platform/flags.js';
import { createLogger } from '../platform/logger.js';
import { WORKER_DEFAULTS, MIN_LEASE_MS, resolveWorkerOptions } from './options.js';
import type { StalledEvent, WorkerLine } from './events.js';
import type { Handler, WorkerHooks } from './types.js';
import { runWorker } from './worker.js';

interface WorkerFlags {
  queue: string;
  gateway: string;
  name: string;
  leaseMs: number;
  pollMs: number;
  workMs: number;
  maxJobs?: number;
  drainMs: number;
  stallMs: number;
  stallBeforeSend: number[];
  stallBeforeFinish: number[];
  logLevel: string;
}

export function workerCommand(): Command {
  return leaseholdCommand('worker')
    .description(
      "Run a worker: claim jobs from the queue, keep each lease alive while working, send each job's qty through the gateway under the lease's owner and token, then finish.",
    )
    .option('--queue <url>', "the queue's base URL", 'http://127.0.0.1:4100')
    .option('--gateway <url>', "the gateway's base URL (every effect goes through it)", 'http://127.0.0.1:4200')
    .option('--name <name>', 'the owner name this worker claims as', `${hostname()}-${process.pid}`)
    .addOption(
      new Option(
        '--lease-ms <ms>',
        `lease asked for on each claim; renewed every max(100, lease/3) ms and before sending (at least ${MIN_LEASE_MS})`,
      )
        .argParser(integerAtLeast(MIN_LEASE_MS))
        .default(WORKER_DEFAULTS.leaseMs),
    )
    .addOption(
      new Option('--poll-ms <ms>', 'wait between claims while the queue has nothing claimable')
        .argParser(integerAtLeast(10))
        .default(WORKER_DEFAULTS.pollMs),
    )
    .addOption(
      new Option('--work-ms <ms>', "simulated work before each job's send (stops when the lease is lost)")
        .argParser(integerAtLeast(0))
        .default(0),
    )
    .addOption(
      new Option('--max-jobs <n>', 'exit after this many claims (default: run until stopped)').argParser(
        integerAtLeast(1),
      ),
    )
    .addOption(
      new Option(
        '--drain-ms <ms>',
        'on SIGTERM/SIGINT, how long the job in hand may still run before it is handed back to the queue',
      )
        .argParser(integerAtLeast(0))
        .default(WORKER_DEFAULTS.drainMs),
    )
    .addOption(
      new Option(
        '--stall-before-send <n,...>',
        "fault injection: on this worker's n-th job(s), pause after the lease check and before the send",
      )
        .argParser(ordinals)
        .default([], 'none'),
    )
    .addOption(
      new Option(
        '--stall-before-finish <n,...>',
        "fault injection: on this worker's n-th job(s), pause after the work and before the finish",
      )
        .argParser(ordinals)
        .default([], 'none'),
    )
    .addOption(
      new Option('--stall-ms <ms>', 'length of each injected pause').argParser(integerAtLeast(1)).default(1_000),
    )
    .addOption(logLevelOption('level of the JSON logs written to stderr (the events go to stdout)'))
    .addHelpText(
      'after',
      [
        '',
        'Output: one JSON line per event on stdout, e.g.',
        '  {"t":1764489600123,"worker":"w1","event":"claimed","job":"job-03","token":2,"attempt":2,"qty":5,"leaseUntil":1764489601623}',
        'Events: started, claimed, renewed, sent, refused, send_failed, call_failed, claim_failed, finished, failed,',
        'lost, stalled, stopping, stopped. "refused" carries the HTTP status, code and reason of the refusal; "lost"',
        'says how the loss was found (during renew, send, finish, fail) and why.',
        '',
        'A lost lease (a renewal, send or finish refused as stale, or no renewal before the lease ends) aborts the',
        'job: nothing more is sent or finished under its token. A job whose handler fails is failed back to the',
        'queue with the error, and retried by the queue.',
        '',
        'SIGTERM or SIGINT: no new claims; the job in hand finishes within --drain-ms or is handed back (fail with',
        'retryInMs 0, so another worker can take it at once); exit code 0. A second signal exits at once (1).',
        '',
        'The stall flags exist for the demo: they hold the worker at the point where a pause hurts most, so the',
        'demo can freeze it there (SIGSTOP) and show that what it does after waking up is refused.',
      ].join('\n'),
    )
    .action(async (flags: WorkerFlags, command: Command) => {
      checkOptions(command, FLAG_NAMES, () =>
        resolveWorkerOptions({
          queueUrl: flags.queue,
          gatewayUrl: flags.gateway,
          name: flags.name,
          leaseMs: flags.leaseMs,
          pollMs: flags.pollMs,
          drainMs: flags.drainMs,
        }),
      );
      await runWorkerProcess(flags);
    });
}

/** The library's option names, as the flags that set them. */
const FLAG_NAMES: Record<string, string> = {
  queueUrl: '--queue',
  gatewayUrl: '--gateway',
  name: '--name',
  leaseMs: '--lease-ms',
  pollMs: '--poll-ms',
  drainMs: '--drain-ms',
};

async function runWorkerProcess(flags: WorkerFlags): Promise<void> {
  const logger = createLogger({ service: 'worker', level: flags.logLevel });
  // Pipes and files take stdout synchronously, so a line is out before the next step begins.
  const print = (line: WorkerLine) => process.stdout.write(`${JSON.stringify(line)}\n`);
  const stop = new AbortController();
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) process.exit(1);
    stopping = true;
    logger.info(
      { signal, drainMs: flags.drainMs },
      `${signal} received: no new claims; the job in hand has ${flags.drainMs} ms to end`,
    );
    // The drain, a hand-back and a margin; then exit regardless.
    setTimeout(() => process.exit(1), flags.drainMs + 10_000).unref();
    stop.abort();
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);

  let ordinal = 0;
  const stall = (before: 'send' | 'finish', wanted: number[]) => async (lease: { id: string; token: number }) => {
    if (!wanted.includes(ordinal)) return;
    // The pause starts before it is announced: whoever freezes this process on seeing the line
    // freezes it inside the pause, whose end is then already due when the process resumes.
    // Deliberately not abortable: it models a step the worker cannot interrupt.
    const pause = sleep(flags.stallMs);
    const stalled: StalledEvent = {
      t: Date.now(),
      worker: flags.name,
      event: 'stalled',
      job: lease.id,
      token: lease.token,
      before,
      ms: flags.stallMs,
    };
    print(stalled);
    await pause;
  };
  const hooks: WorkerHooks = {
    beforeSend: stall('send', flags.stallBeforeSend),
    beforeFinish: stall('finish', flags.stallBeforeFinish),
  };

  try {
    await runWorker({
      queueUrl: flags.queue,
      gatewayUrl: flags.gateway,
      name: flags.name,
      leaseMs: flags.leaseMs,
      pollMs: flags.pollMs,
      drainMs: flags.drainMs,
      hooks,
      handler: sendQtyHandler(flags.workMs),
      onEvent: (event) => {
        if (event.event === 'claimed') ordinal += 1;
        print(event);
      },
      signal: stop.signal,
      ...(flags.maxJobs !== undefined ? { maxJobs: flags.maxJobs } : {}),
    });
  } catch (err) {
    logger.debug({ err }, 'stopped on an error');
    process.stderr.write(
      `leasehold worker: ${flags.name} stopped on an error: ${err instanceof Error ? err.message : String(err)}\n`,
    );
    process.exit(1);
  }
  process.exit(0);
}

/** Simulated work, then one send of the job's qty; the result records what the gateway said. */
export function sendQtyHandler(workMs: number): Handler {
  return async (ctx) => {
    if (workMs > 0) await sleep(workMs, undefined, { signal: ctx.signal });
    await ctx.stage('sending');
    const sent = await ctx.send(ctx.lease.qty);
    return { outcome: sent.outcome, effectToken: sent.effect.token };
  };
}

function ordinals(value: string): number[] {
  const list = value.split(',').map((part) => Number(part.trim()));
  if (list.length === 0 || list.some((n) => !Number.isSafeInteger(n) || n < 1)) {
    throw new InvalidArgumentError(
      `must be job ordinals such as "1" or "1,3" (1 is the first job this worker claims), not ${JSON.stringify(value)}`,
    );
  }
  return list;
}
