// `leasehold worker`: a worker process whose handler sends each job's qty through the gateway,
// after optional simulated work. Every event is one JSON line on stdout; logs go to stderr.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { hostname } from 'node:os';
import { InvalidArgumentError, Option, type Command } from 'commander';
import {
  apiKeyOption,
  checkOptions,
  flagNamesOf,
  integerAtLeast,
  leaseholdCommand,
  logLevelOption,
  parseAutoOrWholeNumber,
} from '../platform/flags.js';
import { createLogger } from '../platform/logger.js';
import { retryWhile } from '../platform/retry.js';
import { GatewayError } from '../gateway/client.js';
import { onStdoutClosed } from '../platform/service-main.js';
import { WORKER_DEFAULTS, MAX_CONCURRENCY, MIN_LEASE_MS, resolveWorkerOptions } from './options.js';
import { eventLines } from './event-lines.js';
import type { ExitingEvent } from './events.js';
import { stallHooks } from './stalls.js';
import type { Handler } from './types.js';
import { runWorker } from './worker.js';

interface WorkerFlags {
  queue: string;
  gateway: string;
  name: string;
  leaseMs: number;
  concurrency: number;
  prefetch: number | 'auto';
  waitMs: number;
  pollMs: number;
  workMs: number;
  sendRetryMs: number;
  maxJobs?: number;
  graceMs: number;
  outputRoot?: string;
  stallMs: number;
  stallBeforeSend: number[];
  stallBeforeFinish: number[];
  apiKey?: string;
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
        `lease asked for on each claim; renewed every max(100, lease/3) ms, and before a send when little of it is left (at least ${MIN_LEASE_MS})`,
      )
        .argParser(integerAtLeast(MIN_LEASE_MS))
        .default(WORKER_DEFAULTS.leaseMs),
    )
    .addOption(
      new Option('--concurrency <n>', `jobs run at once, each under its own lease (at most ${MAX_CONCURRENCY})`)
        .argParser(integerAtLeast(1))
        .default(WORKER_DEFAULTS.concurrency),
    )
    .addOption(
      new Option(
        '--prefetch <n>',
        "leases held beyond --concurrency, each renewed while it waits for a free handler (--concurrency + --prefetch at most 100); 'auto': --concurrency x 20 ms / the handlers' recent time (none while jobs are long)",
      )
        .argParser(parseAutoOrWholeNumber)
        .default(WORKER_DEFAULTS.prefetch),
    )
    .addOption(
      new Option(
        '--wait-ms <ms>',
        'how long one claim waits at the queue for a job (long poll, at most 30000; 0: ask and return at once)',
      )
        .argParser(integerAtLeast(0))
        .default(WORKER_DEFAULTS.waitMs),
    )
    .addOption(
      new Option(
        '--poll-ms <ms>',
        'pause before claiming again after a claim failed, or came back empty without waiting (--wait-ms 0)',
      )
        .argParser(integerAtLeast(10))
        .default(WORKER_DEFAULTS.pollMs),
    )
    .addOption(
      new Option('--work-ms <ms>', "simulated work before each job's send (stops when the lease is lost)")
        .argParser(integerAtLeast(0))
        .default(0),
    )
    .addOption(
      new Option(
        '--send-retry-ms <ms>',
        "how long a job's send is tried again while the gateway, the queue or the downstream cannot be reached, before the job is failed back to the queue (0: at once)",
      )
        .argParser(integerAtLeast(0))
        .default(DEFAULT_SEND_RETRY_MS),
    )
    .addOption(
      new Option('--max-jobs <n>', 'exit after this many claims (default: run until stopped)').argParser(
        integerAtLeast(1),
      ),
    )
    .addOption(
      new Option(
        '--grace-ms <ms>',
        'on SIGTERM/SIGINT, how long running jobs may still take before their leases are released to the queue',
      )
        .argParser(integerAtLeast(0))
        .default(WORKER_DEFAULTS.graceMs),
    )
    .option(
      '--output-root <dir>',
      "write each job's output under <dir>/<job>/<token>/ and record the winning generation in the job's result",
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
    .addOption(
      apiKeyOption(
        "the queue's and the gateway's API key, sent as Authorization: Bearer <key> (prefer LEASEHOLD_API_KEY: command lines are visible to other users)",
      ),
    )
    .addOption(logLevelOption('level of the JSON logs written to stderr (the events go to stdout)'))
    .addHelpText(
      'after',
      [
        '',
        'Output: one JSON line per event on stdout, e.g.',
        '  {"t":1764489600123,"worker":"w1","event":"claimed","job":"job-03","token":2,"attempt":2,"qty":5,"leaseUntil":1764489601623}',
        'Events: started, claimed, turn, renewed, sent, refused, send_failed, call_failed, claim_failed, finished, failed,',
        'lost, released, output, cleaned, stalled, stopping, grace_over, stopped, exiting. "refused" carries the HTTP',
        'status, code and reason of the refusal; "lost" says how the loss was found (during renew, send, finish,',
        'fail, release) and why (a cancelled job: reason "cancelled").',
        '',
        'Up to --concurrency jobs run at once. Free slots are filled by one claim that waits at the queue up to',
        '--wait-ms (long poll); a finished job brings the next one back in the same request. With --prefetch N,',
        'N more leases are held, each waiting (renewed) for a free handler, so the next job starts while the last',
        'one\'s finish is on its way (a "turn" line when a waiting one starts); a stop hands the waiting ones back',
        'unworked. The default, --prefetch auto, holds as many as the handlers would start in 20 ms, judged by how',
        'long they recently took: many while jobs take a millisecond, none while they take seconds; one that waits a',
        'second behind a long job is handed back.',
        '',
        'A lost lease (a renewal, send or finish refused as stale, or no renewal before the lease ends) aborts the',
        'job: nothing more is sent or finished under its token. A job whose handler fails is failed back to the',
        'queue with the error, and retried by the queue; a send that cannot reach the gateway, the queue or the',
        'downstream is first sent again under the same lease, for up to --send-retry-ms.',
        '',
        'SIGTERM or SIGINT: no new claims; running jobs may finish within --grace-ms, then the leases of those still',
        'running are released (claimable by another worker at once, the attempt given back) and their handlers',
        'aborted; exit code 0. A second signal exits at once (1), printing an "exiting" line. A closed stdout',
        '(leasehold worker | head) stops it as SIGTERM does.',
        '',
        'The stall flags exist for the demo: they hold the worker at the point where a pause hurts most, so the',
        'demo can freeze it there (SIGSTOP) and show that what it does after waking up is refused.',
      ].join('\n'),
    )
    .action(async (flags: WorkerFlags, command: Command) => {
      checkOptions(command, flagNamesOf(command, { queueUrl: '--queue', gatewayUrl: '--gateway' }), () =>
        resolveWorkerOptions({
          queueUrl: flags.queue,
          gatewayUrl: flags.gateway,
          apiKey: flags.apiKey,
          name: flags.name,
          leaseMs: flags.leaseMs,
          concurrency: flags.concurrency,
          prefetch: flags.prefetch,
          waitMs: flags.waitMs,
          pollMs: flags.pollMs,
          graceMs: flags.graceMs,
          ...(flags.outputRoot !== undefined ? { outputRoot: flags.outputRoot } : {}),
        }),
      );
      await runWorkerProcess(flags);
    });
}

async function runWorkerProcess(flags: WorkerFlags): Promise<void> {
  const logger = createLogger({ service: 'worker', level: flags.logLevel });
  // Pipes and files take stdout synchronously: a line is out before the process waits again,
  // and a stall's line before the stall can be frozen.
  const lines = eventLines((text) => process.stdout.write(text));
  const stop = new AbortController();
  let stopping = false;
  let running = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) {
      const exiting: ExitingEvent = { t: Date.now(), worker: flags.name, event: 'exiting', signal, running };
      lines.printNow(exiting);
      process.exit(1);
    }
    beginStop({ signal }, `${signal} received`);
  };
  const beginStop = (fields: object, why: string) => {
    stopping = true;
    logger.info(
      { ...fields, graceMs: flags.graceMs },
      `${why}: no new claims; running jobs have ${flags.graceMs} ms to end`,
    );
    // The grace, the releases and a margin; then exit regardless.
    setTimeout(() => process.exit(1), flags.graceMs + 10_000).unref();
    stop.abort();
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  // The reader of the events went away (`leasehold worker | head`): rather than crash with the
  // leases in hand, stop as on SIGTERM, the lines that follow going nowhere.
  onStdoutClosed(() => {
    if (!stopping) beginStop({ stdout: 'closed' }, 'stdout closed');
  });

  const stalls = stallHooks({
    name: flags.name,
    stallMs: flags.stallMs,
    beforeSend: flags.stallBeforeSend,
    beforeFinish: flags.stallBeforeFinish,
    announce: (line) => lines.printNow(line),
  });

  try {
    await runWorker({
      queueUrl: flags.queue,
      gatewayUrl: flags.gateway,
      apiKey: flags.apiKey,
      name: flags.name,
      leaseMs: flags.leaseMs,
      concurrency: flags.concurrency,
      prefetch: flags.prefetch,
      waitMs: flags.waitMs,
      pollMs: flags.pollMs,
      graceMs: flags.graceMs,
      ...(flags.outputRoot !== undefined ? { outputRoot: flags.outputRoot } : {}),
      hooks: stalls.hooks,
      handler: sendQtyHandler(flags.workMs, flags.outputRoot !== undefined, flags.sendRetryMs, stop.signal),
      onEvent: (event) => {
        stalls.observe(event);
        if (event.event === 'claimed') running += 1;
        if (
          event.event === 'finished' ||
          event.event === 'failed' ||
          event.event === 'lost' ||
          event.event === 'released'
        )
          running -= 1;
        lines.print(event);
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

/** `--send-retry-ms`: a minute, so that a gateway or a downstream restarting spends no attempt. */
export const DEFAULT_SEND_RETRY_MS = 60_000;

/**
 * What a send answers when the gateway, the queue behind it or the downstream could not be
 * reached: nothing, or the effect once, was recorded, and the same send under the same lease is
 * safe to repeat (the downstream records an effect once; a repeat is a duplicate).
 */
const UNREACHED: ReadonlySet<string> = new Set(['gateway_unavailable', 'queue_unavailable', 'upstream_unavailable']);

/**
 * Simulated work, then one send of the job's qty; the result records what the gateway said.
 * With `writeOutput`, the work also leaves a file in the lease's own output folder. The send
 * renews the lease first only when it is short (`leaseIsShort`), not on every job. A send that
 * found the gateway, the queue or the downstream out of reach is sent again, under the same
 * lease (renewed meanwhile), for up to `sendRetryMs`: an outage of a service then holds the jobs
 * running, rather than failing each and spending its attempts. A lost lease or a stop
 * (`stopSignal`, the run's) ends the retries at once: the wait between two attempts ends with the
 * stop's abort, which the worker takes as the job given up, and hands its lease back.
 */
export function sendQtyHandler(
  workMs: number,
  writeOutput = false,
  sendRetryMs = 0,
  stopSignal?: AbortSignal,
): Handler {
  return async (ctx) => {
    if (writeOutput) {
      const { id, token, qty, owner } = ctx.lease;
      await writeFile(join(await ctx.outputDir(), 'output.json'), `${JSON.stringify({ id, token, qty, owner })}\n`);
    }
    if (workMs > 0) await sleep(workMs, undefined, { signal: ctx.signal });
    // The simulated work above may use the grace after a stop; waiting out an outage may not.
    const retriesEnd = stopSignal ? AbortSignal.any([ctx.signal, stopSignal]) : ctx.signal;
    const sent = await retryWhile(
      () => ctx.send(ctx.lease.qty),
      (err) => err instanceof GatewayError && UNREACHED.has(err.code),
      { budgetMs: sendRetryMs, firstDelayMs: 250, maxDelayMs: 5_000, signal: retriesEnd },
    );
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
