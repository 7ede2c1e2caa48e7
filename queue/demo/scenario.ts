// The demo as a function: start the services and workers as processes, freeze one worker where
// a pause hurts most (twice: before a send, then before a finish), kill another mid-job, and
// return what happened with the verdict. The CLI only prints it; the system test asserts on it.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { QueueClient } from '../client.js';
import type { WorkerLine } from '../worker/events.js';
import { demoJobs, type DemoJob } from './jobs.js';
import { ChildGroup, describeExit, type Child } from './processes.js';
import { readFinalState, startServiceProcesses, type ServiceChildren, type ServiceUrls } from './services.js';
import { describeEvent, formatEntry, type TimelineEntry } from './timeline.js';
import { judgeDemo, type Check, type FinalState, type Freeze, type ScenarioRecord } from './verdict.js';

export const DEMO_DEFAULTS = { jobs: 12, workers: 3, leaseMs: 1_500, workMs: 300, seed: 42, timeoutMs: 90_000 } as const;

export interface DemoOptions {
  /** `dist/queue/cli.js`: every process is `node <cliPath> <command>`. */
  cliPath: string;
  jobs?: number;
  workers?: number;
  leaseMs?: number;
  /** Simulated work per job before its send. */
  workMs?: number;
  seed?: number;
  /** Keep the temp dir (SQLite files, logs, events) even when the run passes. */
  keep?: boolean;
  /** Each timeline entry, as it happens. */
  onEntry?: (entry: TimelineEntry) => void;
  /** Abort (Ctrl-C) to stop early; every process is still stopped. */
  signal?: AbortSignal;
  timeoutMs?: number;
}

export type ResolvedDemoOptions = Required<Omit<DemoOptions, 'onEntry' | 'signal'>> & Pick<DemoOptions, 'onEntry' | 'signal'>;

export interface DemoResult {
  ok: boolean;
  /** Why it is not ok: errors, then every failed check. */
  reasons: string[];
  dir: string;
  kept: boolean;
  durationMs: number;
  options: Omit<ResolvedDemoOptions, 'onEntry' | 'signal'>;
  jobs: DemoJob[];
  timeline: TimelineEntry[];
  events: WorkerLine[];
  scenario: ScenarioRecord;
  final: FinalState | undefined;
  checks: Check[];
}

/** The worker that is frozen; the first to start, so its first job is known to be job one. */
const FROZEN = 'w1';

export function resolveDemoOptions(options: DemoOptions): ResolvedDemoOptions {
  const int = (what: string, value: number, min: number, max: number) => {
    if (!Number.isSafeInteger(value) || value < min || value > max) {
      throw new RangeError(`${what} must be an integer from ${min} to ${max}, not ${String(value)}.`);
    }
    return value;
  };
  return {
    cliPath: options.cliPath,
    // Half the jobs are enqueued after the first freeze: both halves need work for three workers.
    jobs: int('--jobs', options.jobs ?? DEMO_DEFAULTS.jobs, 6, 1_000),
    // One to freeze, one to kill, at least one to carry on.
    workers: int('--workers', options.workers ?? DEMO_DEFAULTS.workers, 3, 20),
    leaseMs: int('--lease-ms', options.leaseMs ?? DEMO_DEFAULTS.leaseMs, 600, 60_000),
    workMs: int('--work-ms', options.workMs ?? DEMO_DEFAULTS.workMs, 0, 60_000),
    seed: int('--seed', options.seed ?? DEMO_DEFAULTS.seed, 0, 2 ** 32 - 1),
    keep: options.keep ?? false,
    timeoutMs: int('timeoutMs', options.timeoutMs ?? DEMO_DEFAULTS.timeoutMs, 1_000, 3_600_000),
    onEntry: options.onEntry,
    signal: options.signal,
  };
}

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
  private readonly scenario: ScenarioRecord = {};
  private readonly reasons: string[] = [];
  private readonly workers = new Map<string, Child>();
  private readonly firstClaim: { promise: Promise<void>; resolve: () => void };
  private urls: ServiceUrls | undefined;
  private services: ServiceChildren | undefined;
  private queue: QueueClient | undefined;
  private failure: Error | undefined;
  private final: FinalState | undefined;

  constructor(private readonly options: ResolvedDemoOptions) {
    this.jobs = demoJobs(options.jobs, options.seed);
    let resolve!: () => void;
    this.firstClaim = { promise: new Promise<void>((r) => (resolve = r)), resolve };
  }

  async execute(): Promise<void> {
    const { options } = this;
    this.note('demo', `${options.jobs} jobs, ${options.workers} workers, lease ${options.leaseMs} ms, work ${options.workMs} ms per job, seed ${options.seed}; files in ${this.dir}`);
    const started = await startServiceProcesses({
      cliPath: options.cliPath,
      group: this.group,
      host: '127.0.0.1',
      ports: { queue: 0, gateway: 0, receiver: 0 },
      db: { queue: join(this.dir, 'queue.sqlite'), receiver: join(this.dir, 'receiver.sqlite') },
      logLevel: 'info',
      stderr: (name) => ({ file: join(this.dir, `${name}.log`) }),
      secret: randomBytes(16).toString('hex'),
      onReady: (name, url, child) => this.note(name, `listening on ${url} (pid ${child.pid})`),
    });
    this.urls = started.urls;
    this.services = started.children;
    this.queue = new QueueClient(started.urls.queue);
    this.note('demo', 'the gateway signs every effect it forwards and the receiver checks the signature (a fresh shared secret)');

    const half = Math.floor(this.jobs.length / 2);
    await this.enqueue(this.jobs.slice(0, half));
    // The frozen worker starts alone, so the first job is its own; the others join once it has it.
    this.spawnWorker(FROZEN);
    await this.within(this.firstClaim.promise, 20_000, `${FROZEN} to claim its first job`);
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
    const workers = [...this.workers.values()];
    if (this.failure) {
      this.group.killNow();
    } else {
      this.note('demo', 'all jobs settled; stopping the workers (SIGTERM)');
    }
    await this.group.stop(5_000, workers);
    if (this.urls && this.services?.queue.running && this.services.receiver.running) {
      try {
        this.final = await readFinalState(this.urls);
      } catch (err) {
        this.failWith(new Error(`could not read the final state: ${(err as Error).message}`));
      }
    }
    this.queue?.close();
    await this.group.dispose(5_000);
    for (const child of this.group.all) {
      if (!workers.includes(child) && this.failure === undefined) this.note(child.name, `stopped (${describeExit(await child.exited)})`);
    }
    const checks = this.final ? judgeDemo({ jobs: this.jobs, final: this.final, scenario: this.scenario, events: this.events }) : [];
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
      durationMs: Date.now() - this.t0,
      options,
      jobs: this.jobs,
      timeline: this.timeline,
      events: this.events,
      scenario: this.scenario,
      final: this.final,
      checks,
    };
  }

  private spawnWorker(name: string): void {
    const { options, urls } = this;
    const args = ['worker', '--queue', urls!.queue, '--gateway', urls!.gateway, '--name', name];
    args.push('--lease-ms', String(options.leaseMs), '--poll-ms', '100', '--work-ms', String(options.workMs), '--drain-ms', '2000');
    if (name === FROZEN) {
      // Its first job stalls between the lease check and the send; its second, before the finish.
      args.push('--stall-before-send', '1', '--stall-before-finish', '2', '--stall-ms', String(Math.floor(options.leaseMs / 2)));
    }
    const child = this.group.spawn({
      name,
      cliPath: options.cliPath,
      args,
      stderr: { file: join(this.dir, `${name}.log`) },
      onLine: (line) => this.onLine(name, line),
    });
    this.workers.set(name, child);
    void child.exited.then((exit) => {
      if (this.scenario.kill?.worker !== name && exit.code !== 0 && this.failure === undefined) {
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
    this.entry({ ms: event.t - this.t0, who: event.worker, text: describeEvent(event, this.t0) });
    try {
      this.react(event);
    } catch (err) {
      this.failWith(err);
    }
  }

  /** The scenario's moves, each triggered by what a worker just reported. */
  private react(e: WorkerLine): void {
    const { scenario } = this;
    if (e.event === 'claimed' && e.worker === FROZEN) this.firstClaim.resolve();
    if (e.event === 'stalled' && e.worker === FROZEN) {
      const slot = e.before === 'send' ? 'staleSend' : 'staleFinish';
      if (!scenario[slot]) {
        this.workers.get(FROZEN)!.signal('SIGSTOP');
        scenario[slot] = { worker: FROZEN, job: e.job, token: e.token, before: e.before, frozenAt: this.now() };
        this.note('demo', `FREEZE ${FROZEN} (SIGSTOP) inside that stall: it holds ${e.job} with token ${e.token}, its lease will run out`);
        this.guardFreeze(scenario[slot]);
      }
    }
    if (e.event === 'claimed') {
      for (const freeze of [scenario.staleSend, scenario.staleFinish]) {
        if (freeze && !freeze.takenOverBy && e.job === freeze.job && e.worker !== freeze.worker) {
          freeze.takenOverBy = { worker: e.worker, token: e.token };
          void this.resume(freeze).catch((err: unknown) => this.failWith(err));
        }
      }
      const kill = scenario.kill;
      if (kill && !kill.recoveredBy && e.job === kill.job && e.worker !== kill.worker) kill.recoveredBy = { worker: e.worker, token: e.token };
      // The victim: the first other worker to take a fresh job once the first freeze is over.
      if (!kill && scenario.staleSend?.resumedAt !== undefined && e.worker !== FROZEN && e.attempt === 1) {
        void this.workers.get(e.worker)!.kill();
        scenario.kill = { worker: e.worker, job: e.job, token: e.token, killedAt: this.now() };
        this.note('demo', `KILL ${e.worker} (SIGKILL) mid-job: it holds ${e.job} with token ${e.token}; nobody will finish it until its lease ends`);
      }
    }
    for (const freeze of [scenario.staleSend, scenario.staleFinish]) {
      if (!freeze || freeze.resumedAt === undefined || !('job' in e) || e.job !== freeze.job || e.worker !== freeze.worker) continue;
      if (e.event === 'refused' && e.op === freeze.before && !freeze.refusal) {
        freeze.refusal = { op: e.op, status: e.status, code: e.code, ...(e.reason ? { reason: e.reason } : {}) };
      }
      if (e.event === 'lost') freeze.lostReported = true;
    }
  }

  private async resume(freeze: Freeze): Promise<void> {
    // More work arrives while the frozen worker sleeps, so there is a fresh job for it after waking.
    if (freeze === this.scenario.staleSend) await this.enqueue(this.jobs.slice(Math.floor(this.jobs.length / 2)));
    this.workers.get(freeze.worker)!.signal('SIGCONT');
    freeze.resumedAt = this.now();
    const by = freeze.takenOverBy;
    this.note(
      'demo',
      `RESUME ${freeze.worker} (SIGCONT): ${freeze.job} now belongs to ${by ? `${by.worker} with token ${by.token}` : 'nobody else'}; ${freeze.worker} still holds token ${freeze.token} and goes on to ${freeze.before}`,
    );
  }

  /** A freeze that nobody takes over (it missed its stall) is ended after a while, and reported. */
  private guardFreeze(freeze: Freeze): void {
    const ms = this.options.leaseMs * 3 + 5_000;
    setTimeout(() => {
      if (freeze.resumedAt !== undefined) return;
      this.reasons.push(`no other worker took ${freeze.job} over within ${ms} ms of freezing ${freeze.worker}`);
      freeze.missed = true;
      void this.resume(freeze).catch((err: unknown) => this.failWith(err));
    }, ms).unref();
  }

  private async untilSettled(): Promise<void> {
    const deadline = this.t0 + this.options.timeoutMs;
    for (;;) {
      if (this.failure) throw this.failure;
      if (this.options.signal?.aborted) throw new Error('interrupted');
      const stats = await this.queue!.stats();
      const allDone = stats.done + stats.dead === this.jobs.length;
      const settled = (f: Freeze | undefined) => (f ? f.lostReported === true || f.missed === true : allDone);
      const { staleSend, staleFinish, kill } = this.scenario;
      if (allDone && settled(staleSend) && settled(staleFinish) && (kill !== undefined || allDone)) return;
      if (Date.now() > deadline) {
        throw new Error(`timed out after ${this.options.timeoutMs} ms with ${stats.done} of ${this.jobs.length} jobs done (${JSON.stringify(stats)})`);
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
