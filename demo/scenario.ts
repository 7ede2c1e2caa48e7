// The demo as a function: start the services and workers as processes, freeze one worker where
// a pause hurts most (twice: before a send, then before a finish), kill another mid-job, and
// return what happened with the verdict. The CLI only prints it; the system test asserts on it.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { QueueClient } from '../queue/client.js';
import type { WorkerLine } from '../worker/index.js';
import { demoJobs, type DemoJob } from './jobs.js';
import { ChildGroup, describeExit, type Child, type ExitInfo } from './processes.js';
import { readFinalState, startServiceProcesses, type ServiceChildren, type ServiceUrls } from './services.js';
import { describeEvent, formatEntry, type TimelineEntry } from './timeline.js';
import { Director } from './director.js';
import { readOutputs } from './outputs.js';
import { resolveDemoOptions, type DemoOptions, type ResolvedDemoOptions } from './options.js';
import { judgeDemo, type Check, type FinalState, type ScenarioRecord } from './verdict.js';

export interface DemoResult {
  ok: boolean;
  /** Why it is not ok: errors, then every failed check. */
  reasons: string[];
  dir: string;
  kept: boolean;
  /** Epoch ms of the start: every `ms` in the timeline and the scenario counts from it. */
  startedAt: number;
  durationMs: number;
  options: Omit<ResolvedDemoOptions, 'onEntry' | 'signal'>;
  jobs: DemoJob[];
  timeline: TimelineEntry[];
  events: WorkerLine[];
  scenario: ScenarioRecord;
  final: FinalState | undefined;
  checks: Check[];
  /** Every process the demo started, and how it ended: none is left running. */
  processes: Array<{ name: string; pid: number; exit: ExitInfo }>;
}

/** The worker that is frozen; the first to start, so its first job is known to be job one. */
const FROZEN = 'w1';

export async function runDemo(input: DemoOptions): Promise<DemoResult> {
  const run = new DemoRun(resolveDemoOptions(input));
  try {
    await run.execute();
  } catch (err) {
    run.failWith(err);
  }
  return run.finish();
}

class DemoRun {
  private readonly t0 = Date.now();
  private readonly dir = mkdtempSync(join(tmpdir(), 'leasehold-demo-'));
  private readonly group = new ChildGroup();
  private readonly jobs: DemoJob[];
  private readonly timeline: TimelineEntry[] = [];
  private readonly events: WorkerLine[] = [];
  private readonly director: Director;
  private readonly reasons: string[] = [];
  private readonly workers = new Map<string, Child>();
  /** The queue's and the gateway's API key for this run; workers get it as LEASEHOLD_API_KEY. */
  private readonly apiKey = randomBytes(16).toString('hex');
  private urls: ServiceUrls | undefined;
  private services: ServiceChildren | undefined;
  private queue: QueueClient | undefined;
  private failure: Error | undefined;
  private final: FinalState | undefined;

  constructor(private readonly options: ResolvedDemoOptions) {
    this.jobs = demoJobs(options.jobs, options.seed);
    this.director = new Director({
      frozen: FROZEN,
      leaseMs: options.leaseMs,
      worker: (name) => this.workers.get(name),
      // More work arrives while the frozen worker sleeps, so there is a fresh job for it after waking.
      beforeFirstResume: () => this.enqueue(this.jobs.slice(Math.floor(this.jobs.length / 2))),
      note: (text) => this.note('demo', text),
      fail: (err) => this.failWith(err),
      now: () => this.now(),
    });
  }

  async execute(): Promise<void> {
    const { options } = this;
    this.note(
      'demo',
      `${options.jobs} jobs, ${options.workers} workers, lease ${options.leaseMs} ms, work ${options.workMs} ms per job, seed ${options.seed}; files in ${this.dir}`,
    );
    const started = await this.abortable(
      startServiceProcesses({
        cliPath: options.cliPath,
        group: this.group,
        host: '127.0.0.1',
        ports: { queue: 0, gateway: 0, receiver: 0 },
        db: {
          queue: join(this.dir, 'queue.sqlite'),
          receiver: join(this.dir, 'receiver.sqlite'),
          mailer: join(this.dir, 'mailer.sqlite'),
        },
        logLevel: 'info',
        stderr: (name) => ({ file: join(this.dir, `${name}.log`) }),
        secret: randomBytes(16).toString('hex'),
        apiKey: this.apiKey,
        onReady: (name, url, child) => this.note(name, `listening on ${url} (pid ${child.pid})`),
      }),
    );
    this.urls = started.urls;
    this.services = started.children;
    this.queue = new QueueClient(started.urls.queue, { apiKey: this.apiKey });
    this.note(
      'demo',
      'each job sends two effects under its lease, at once: its qty to the receiver, and an e-mail (key "email") to the mailer, a fencedEffects service',
    );
    this.note(
      'demo',
      'the gateway signs every effect it forwards and both downstreams check the signature (a fresh shared secret); ' +
        'the queue and the gateway take only calls that carry their API key (another fresh secret)',
    );

    const half = Math.floor(this.jobs.length / 2);
    await this.abortable(this.enqueue(this.jobs.slice(0, half)));
    // The frozen worker starts alone, so the first job is its own; the others join once it has it.
    this.spawnWorker(FROZEN);
    await this.abortable(this.within(this.director.firstClaim, 20_000, `${FROZEN} to claim its first job`));
    for (let i = 2; i <= options.workers; i += 1) this.spawnWorker(`w${i}`);
    await this.untilSettled();
  }

  failWith(err: unknown): void {
    const error = err instanceof Error ? err : new Error(String(err));
    this.failure ??= error;
    this.reasons.push(error.message);
  }

  /** Stops every process, reads the final state, judges, and tidies up. */
  async finish(): Promise<DemoResult> {
    await this.stopAll();
    const scenario = this.director.scenario;
    this.reasons.push(...this.director.problems);
    const outputs = readOutputs(join(this.dir, 'outputs'));
    const checks = this.final
      ? judgeDemo({ jobs: this.jobs, final: this.final, scenario, events: this.events, outputs })
      : [];
    for (const check of checks) {
      if (check.ok === false) this.reasons.push(`${check.label}: expected ${check.expected}, got ${check.actual}`);
    }
    const ok = this.reasons.length === 0 && this.final !== undefined;
    const kept = this.options.keep || !ok;
    this.writeRecords();
    if (!kept) rmSync(this.dir, { recursive: true, force: true });
    const { onEntry: _onEntry, signal: _signal, ...options } = this.options;
    return {
      ok,
      reasons: this.reasons,
      dir: this.dir,
      kept,
      startedAt: this.t0,
      durationMs: Date.now() - this.t0,
      options,
      jobs: this.jobs,
      timeline: this.timeline,
      events: this.events,
      scenario,
      final: this.final,
      checks,
      processes: await Promise.all(
        this.group.all.map(async (c) => ({ name: c.name, pid: c.pid, exit: await c.exited })),
      ),
    };
  }

  /** Workers first (killed when the run failed), then the final state is read, then the services. */
  private async stopAll(): Promise<void> {
    const workers = [...this.workers.values()];
    if (this.failure) {
      for (const worker of workers) worker.signal('SIGKILL');
    } else {
      this.note('demo', 'all jobs settled; stopping the workers (SIGTERM)');
    }
    await this.group.stop(5_000, workers);
    if (this.urls && this.services?.queue.running && this.services.receiver.running && this.services.mailer?.running) {
      try {
        this.final = await readFinalState(this.urls, this.apiKey);
      } catch (err) {
        this.failWith(new Error(`could not read the final state: ${(err as Error).message}`));
      }
    }
    this.queue?.close();
    await this.group.dispose(5_000);
    if (this.failure === undefined && this.services) {
      for (const child of Object.values(this.services))
        this.note(child.name, `stopped (${describeExit(await child.exited)})`);
    }
  }

  private spawnWorker(name: string): void {
    const { options, urls } = this;
    // The demo's worker: each job's qty to the receiver and its e-mail to the mailer, at once.
    const args = ['demo-worker', '--queue', urls!.queue, '--gateway', urls!.gateway, '--name', name];
    args.push(
      '--lease-ms',
      String(options.leaseMs),
      '--poll-ms',
      '100',
      '--work-ms',
      String(options.workMs),
      '--grace-ms',
      '2000',
      '--output-root',
      join(this.dir, 'outputs'),
    );
    if (name === FROZEN) {
      // Its first job stalls between the lease check and the send; its second, before the finish.
      args.push(
        '--stall-before-send',
        '1',
        '--stall-before-finish',
        '2',
        '--stall-ms',
        String(Math.floor(options.leaseMs / 2)),
      );
    }
    const child = this.group.spawn({
      name,
      cliPath: options.cliPath,
      args,
      // The key travels in the environment: a command line is visible to every user of the machine.
      env: { ...process.env, LEASEHOLD_API_KEY: this.apiKey },
      stderr: { file: join(this.dir, `${name}.log`) },
      onLine: (line) => this.onLine(name, line),
    });
    this.workers.set(name, child);
    void child.exited.then((exit) => {
      if (this.director.scenario.kill?.worker !== name && exit.code !== 0 && this.failure === undefined) {
        this.failWith(new Error(`worker ${name} exited unexpectedly (${describeExit(exit)}).${child.logTail()}`));
      }
    });
  }

  private onLine(worker: string, line: string): void {
    let event: WorkerLine;
    try {
      event = JSON.parse(line) as WorkerLine;
    } catch {
      this.note(worker, line);
      return;
    }
    this.events.push(event);
    const pid = event.event === 'started' ? ` (pid ${this.workers.get(worker)?.pid})` : '';
    this.entry({ ms: event.t - this.t0, who: event.worker, text: `${describeEvent(event, this.t0)}${pid}` });
    try {
      this.director.react(event);
    } catch (err) {
      this.failWith(err);
    }
  }

  private async untilSettled(): Promise<void> {
    const deadline = this.t0 + this.options.timeoutMs;
    for (;;) {
      if (this.failure) throw this.failure;
      if (this.options.signal?.aborted) throw new Error('interrupted');
      const stats = await this.queue!.stats();
      const allDone = stats.done + stats.dead === this.jobs.length;
      if (allDone && this.director.settled(allDone)) return;
      if (Date.now() > deadline) {
        throw new Error(
          `timed out after ${this.options.timeoutMs} ms with ${stats.done} of ${this.jobs.length} jobs done (${JSON.stringify(stats)})`,
        );
      }
      await sleep(100, undefined, this.options.signal ? { signal: this.options.signal } : {}).catch(() => {});
    }
  }

  private async enqueue(jobs: DemoJob[]): Promise<void> {
    for (const job of jobs) await this.queue!.enqueue(job);
    this.note('demo', `enqueued ${jobs.map((j) => `${j.id} (qty ${j.qty})`).join(', ')}`);
  }

  private async within(promise: Promise<void>, ms: number, what: string): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
    });
    try {
      await Promise.race([promise, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Rejects as soon as the run is interrupted, instead of waiting for `promise`. */
  private abortable<T>(promise: Promise<T>): Promise<T> {
    const signal = this.options.signal;
    if (!signal) return promise;
    if (signal.aborted) return Promise.reject(new Error('interrupted'));
    return new Promise<T>((resolve, reject) => {
      const onAbort = () => reject(new Error('interrupted'));
      signal.addEventListener('abort', onAbort, { once: true });
      promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
    });
  }

  private now(): number {
    return Date.now() - this.t0;
  }

  private note(who: string, text: string): void {
    this.entry({ ms: this.now(), who, text });
  }

  private entry(entry: TimelineEntry): void {
    this.timeline.push(entry);
    this.options.onEntry?.(entry);
  }

  private writeRecords(): void {
    try {
      writeFileSync(join(this.dir, 'timeline.txt'), `${this.timeline.map(formatEntry).join('\n')}\n`);
      writeFileSync(join(this.dir, 'events.jsonl'), this.events.map((e) => JSON.stringify(e)).join('\n') + '\n');
    } catch {
      // The records are a convenience; a full disk must not hide the verdict.
    }
  }
}
