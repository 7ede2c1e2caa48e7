// The scenario's moves, each triggered by what a worker just reported: freeze the worker when
// it enters an injected stall, resume it once another worker has taken its job over, and kill
// a worker the moment it takes a fresh job after the first freeze.
import type { WorkerLine } from '../worker/index.js';
import type { Child } from './processes.js';
import type { Freeze, ScenarioRecord } from './verdict.js';

export interface DirectorDeps {
  /** The worker started with the stall flags. */
  frozen: string;
  leaseMs: number;
  worker(name: string): Child | undefined;
  /** Runs before the first resume: the second half of the jobs, so there is work after waking. */
  beforeFirstResume(): Promise<void>;
  note(text: string): void;
  fail(err: unknown): void;
  /** Ms since the demo started. */
  now(): number;
}

export class Director {
  readonly scenario: ScenarioRecord = {};
  /** Problems that do not stop the run but fail it. */
  readonly problems: string[] = [];
  readonly firstClaim: Promise<void>;
  private resolveFirstClaim!: () => void;

  constructor(private readonly deps: DirectorDeps) {
    this.firstClaim = new Promise((resolve) => (this.resolveFirstClaim = resolve));
  }

  react(e: WorkerLine): void {
    const { scenario, deps } = this;
    if (e.event === 'claimed' && e.worker === deps.frozen) this.resolveFirstClaim();
    if (e.event === 'stalled' && e.worker === deps.frozen) this.freeze(e);
    if (e.event === 'claimed') {
      for (const freeze of [scenario.staleSend, scenario.staleFinish]) {
        if (freeze && !freeze.takenOverBy && e.job === freeze.job && e.worker !== freeze.worker) {
          freeze.takenOverBy = { worker: e.worker, token: e.token };
          void this.resume(freeze).catch((err: unknown) => deps.fail(err));
        }
      }
      const kill = scenario.kill;
      if (kill && !kill.recoveredBy && e.job === kill.job && e.worker !== kill.worker)
        kill.recoveredBy = { worker: e.worker, token: e.token };
      // The victim: the first other worker to take a fresh job once the first freeze is over.
      if (!kill && scenario.staleSend?.resumedAt !== undefined && e.worker !== deps.frozen && e.attempt === 1) {
        void deps.worker(e.worker)!.kill();
        scenario.kill = { worker: e.worker, job: e.job, token: e.token, killedAt: deps.now() };
        deps.note(
          `KILL ${e.worker} (SIGKILL) mid-job: it holds ${e.job} with token ${e.token}; nobody will finish it until its lease ends`,
        );
      }
    }
    for (const freeze of [scenario.staleSend, scenario.staleFinish]) {
      if (
        !freeze ||
        freeze.resumedAt === undefined ||
        !('job' in e) ||
        e.job !== freeze.job ||
        e.worker !== freeze.worker
      )
        continue;
      if (e.event === 'refused' && e.op === freeze.before) {
        freeze.refusal ??= { op: e.op, status: e.status, code: e.code, ...(e.reason ? { reason: e.reason } : {}) };
        // The worker sends each of its effects at once: every one of them must be refused.
        if (e.op === 'send' && e.code === 'stale_lease') freeze.refusedSends = (freeze.refusedSends ?? 0) + 1;
      }
      if (e.event === 'send_failed' && freeze.before === 'send') (freeze.failedSends ??= []).push(e.code);
      if (e.event === 'lost') freeze.lostReported = true;
    }
  }

  /** Whether every staged fault has played out (or, once all jobs are done, can no longer happen). */
  settled(allDone: boolean): boolean {
    const done = (f: Freeze | undefined) => (f ? f.lostReported === true || f.missed === true : allDone);
    const { staleSend, staleFinish, kill } = this.scenario;
    return done(staleSend) && done(staleFinish) && (kill !== undefined || allDone);
  }

  private freeze(e: Extract<WorkerLine, { event: 'stalled' }>): void {
    const slot = e.before === 'send' ? 'staleSend' : 'staleFinish';
    if (this.scenario[slot]) return;
    this.deps.worker(e.worker)!.signal('SIGSTOP');
    const freeze: Freeze = {
      worker: e.worker,
      job: e.job,
      token: e.token,
      before: e.before,
      frozenAt: this.deps.now(),
    };
    this.scenario[slot] = freeze;
    this.deps.note(
      `FREEZE ${e.worker} (SIGSTOP) inside that stall: it holds ${e.job} with token ${e.token}, its lease will run out`,
    );
    this.guard(freeze);
  }

  private async resume(freeze: Freeze): Promise<void> {
    if (freeze === this.scenario.staleSend) await this.deps.beforeFirstResume();
    this.deps.worker(freeze.worker)!.signal('SIGCONT');
    freeze.resumedAt = this.deps.now();
    const by = freeze.takenOverBy;
    this.deps.note(
      `RESUME ${freeze.worker} (SIGCONT): ${freeze.job} now belongs to ${by ? `${by.worker} with token ${by.token}` : 'nobody else'}; ${freeze.worker} still holds token ${freeze.token} and goes on to ${freeze.before}`,
    );
  }

  /** A freeze nobody takes over (it missed its stall) is ended after a while, and reported. */
  private guard(freeze: Freeze): void {
    const ms = this.deps.leaseMs * 3 + 5_000;
    setTimeout(() => {
      if (freeze.resumedAt !== undefined) return;
      this.problems.push(`no other worker took ${freeze.job} over within ${ms} ms of freezing ${freeze.worker}`);
      freeze.missed = true;
      void this.resume(freeze).catch((err: unknown) => this.deps.fail(err));
    }, ms).unref();
  }
}
