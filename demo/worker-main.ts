// `leasehold demo-worker`: the demo's worker process. It is `leasehold worker` with the demo's
// handler, which sends two effects under each lease at once — the job's qty to the receiver and
// an e-mail to the mailer — and with the stalls the demo freezes it in. One JSON line per event.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { InvalidArgumentError, Option, type Command } from 'commander';
import { integerAtLeast, leaseholdCommand } from '../platform/flags.js';
import {
  MIN_LEASE_MS,
  runWorker,
  stallHooks,
  type Handler,
  type SendOutcome,
  type WorkerLine,
} from '../worker/index.js';

/** The mailer's name at the gateway, and the key of the e-mail effect. */
export const MAILER = 'mailer';
export const EMAIL_KEY = 'email';

/** The e-mail of a job: the same for every holder of it, so a holder's resend is a duplicate, never a conflict. */
export function emailOf(job: { id: string; qty: number }): { to: string; subject: string } {
  return { to: 'orders@example.com', subject: `${job.id} shipped: qty ${job.qty}` };
}

interface DemoWorkerFlags {
  queue: string;
  gateway: string;
  name: string;
  leaseMs: number;
  pollMs: number;
  workMs: number;
  graceMs: number;
  outputRoot?: string;
  stallMs: number;
  stallBeforeSend: number[];
  stallBeforeFinish: number[];
}

export function demoWorkerCommand(): Command {
  return leaseholdCommand('demo-worker')
    .description(
      "The demo's worker: claims jobs, then sends each job's qty to the receiver and its e-mail to the mailer at once, under the lease, and finishes. The queue's and the gateway's API key come from LEASEHOLD_API_KEY.",
    )
    .requiredOption('--queue <url>', "the queue's base URL")
    .requiredOption('--gateway <url>', "the gateway's base URL")
    .requiredOption('--name <name>', 'the owner name this worker claims as')
    .addOption(
      new Option('--lease-ms <ms>', 'lease asked for on each claim')
        .argParser(integerAtLeast(MIN_LEASE_MS))
        .default(1_500),
    )
    .addOption(new Option('--poll-ms <ms>', 'pause before claiming again').argParser(integerAtLeast(10)).default(100))
    .addOption(new Option('--work-ms <ms>', 'simulated work before the sends').argParser(integerAtLeast(0)).default(0))
    .addOption(
      new Option('--grace-ms <ms>', 'time running jobs get on SIGTERM').argParser(integerAtLeast(0)).default(2_000),
    )
    .option('--output-root <dir>', "write each job's output under <dir>/<job>/<token>/")
    .addOption(
      new Option('--stall-before-send <n,...>', "pause before this worker's n-th job's sends")
        .argParser(ordinals)
        .default([]),
    )
    .addOption(
      new Option('--stall-before-finish <n,...>', "pause before this worker's n-th job's finish")
        .argParser(ordinals)
        .default([]),
    )
    .addOption(new Option('--stall-ms <ms>', 'length of each pause').argParser(integerAtLeast(1)).default(1_000))
    .action(async (flags: DemoWorkerFlags) => {
      await runDemoWorker(flags);
    });
}

async function runDemoWorker(flags: DemoWorkerFlags): Promise<void> {
  // Pipes and files take stdout synchronously, so a line is out before the next step begins.
  const print = (line: WorkerLine) => process.stdout.write(`${JSON.stringify(line)}\n`);
  const stop = new AbortController();
  let stopping = false;
  const onSignal = () => {
    if (stopping) process.exit(1);
    stopping = true;
    setTimeout(() => process.exit(1), flags.graceMs + 10_000).unref();
    stop.abort();
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);

  const stalls = stallHooks({
    name: flags.name,
    stallMs: flags.stallMs,
    beforeSend: flags.stallBeforeSend,
    beforeFinish: flags.stallBeforeFinish,
    announce: print,
  });

  try {
    await runWorker({
      queueUrl: flags.queue,
      gatewayUrl: flags.gateway,
      apiKey: process.env.LEASEHOLD_API_KEY,
      name: flags.name,
      leaseMs: flags.leaseMs,
      pollMs: flags.pollMs,
      graceMs: flags.graceMs,
      ...(flags.outputRoot !== undefined ? { outputRoot: flags.outputRoot } : {}),
      hooks: stalls.hooks,
      handler: twoEffects(flags.workMs, flags.outputRoot !== undefined),
      onEvent: (event) => {
        stalls.observe(event);
        print(event);
      },
      signal: stop.signal,
    });
  } catch (err) {
    process.stderr.write(
      `leasehold demo-worker: ${flags.name} stopped on an error: ${err instanceof Error ? err.message : String(err)}\n`,
    );
    process.exit(1);
  }
  process.exit(0);
}

/**
 * Simulated work, then the job's two effects at once: its qty to the receiver (the default
 * effect) and its e-mail to the mailer. Both are on their way before either answers, so a stale
 * holder's two sends are each refused; the handler ends once both have answered.
 */
export function twoEffects(workMs: number, writeOutput: boolean): Handler {
  return async (ctx) => {
    const { id, token, qty, owner } = ctx.lease;
    if (writeOutput) {
      await writeFile(join(await ctx.outputDir(), 'output.json'), `${JSON.stringify({ id, token, qty, owner })}\n`);
    }
    if (workMs > 0) await sleep(workMs, undefined, { signal: ctx.signal });
    const [receipt, mail] = await Promise.allSettled([
      ctx.send(qty),
      ctx.send({ to: MAILER, key: EMAIL_KEY, body: emailOf({ id, qty }) }),
    ]);
    const answered = (r: PromiseSettledResult<SendOutcome>) => {
      if (r.status === 'rejected') throw r.reason;
      return r.value;
    };
    const [r, m] = [answered(receipt), answered(mail)];
    return {
      outcome: r.outcome,
      effectToken: r.effect.token,
      mail: { outcome: m.outcome, effectToken: m.effect.token },
    };
  };
}

function ordinals(value: string): number[] {
  const list = value.split(',').map((part) => Number(part.trim()));
  if (list.length === 0 || list.some((n) => !Number.isSafeInteger(n) || n < 1)) {
    throw new InvalidArgumentError(`must be job ordinals such as "1" or "1,3", not ${JSON.stringify(value)}`);
  }
  return list;
}
