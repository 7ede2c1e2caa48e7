// `npm run bench -- --testkit`: how fast the test kit is in the test's own process, after the
// first import — startSystem() until ready, reset() on a system that has work in it, and the
// whole zombie test of docs/testing-kit.md — as medians over rounds, against the kit's goals.
import { hold, startSystem, type System } from '../testing/index.js';
import type { JobContext } from '../worker/index.js';
import { table } from './report.js';
import { summarize, type Summary } from './stats.js';

/** The kit's goals, in ms: a median at most this (the zombie: under it). */
export const TESTKIT_GOALS = { startMs: 60, resetMs: 5, zombieMs: 200 } as const;

export interface TestkitFigures {
  rounds: number;
  start: Summary | null;
  reset: Summary | null;
  zombie: Summary | null;
}

/** Jobs done, with their effects, before each reset is timed: a reset erases real rows. */
const JOBS_BEFORE_RESET = 20;

async function ship(ctx: JobContext) {
  await ctx.send();
  return { shipped: ctx.lease.qty };
}

async function timed<T>(work: () => Promise<T>): Promise<[number, T]> {
  const started = performance.now();
  const value = await work();
  return [performance.now() - started, value];
}

async function startRound(): Promise<number> {
  const [ms, system] = await timed(() => startSystem());
  await system.close();
  return ms;
}

async function resetRound(): Promise<number> {
  const system = await startSystem();
  try {
    for (let i = 0; i < JOBS_BEFORE_RESET; i++) await shipOne(system, `job-${i}`);
    const [ms] = await timed(() => system.reset());
    return ms;
  } finally {
    await system.close();
  }
}

async function shipOne(system: System, id: string): Promise<void> {
  await system.queue.enqueue({ id, qty: 1 });
  const lease = (await system.queue.claim('bench'))!;
  await system.gateway.send({ jobId: id, owner: lease.owner, token: lease.token, qty: 1 });
  await system.queue.finish(id, { owner: lease.owner, token: lease.token });
}

/** The zombie test as docs/testing-kit.md writes it, start and close included. */
async function zombieRound(): Promise<number> {
  const [ms] = await timed(async () => {
    const system = await startSystem({ clock: 'manual' });
    try {
      await system.queue.enqueue({ id: 'order-1', qty: 2 });
      const stall = hold();
      const first = system.worker('a', { hooks: { beforeSend: stall.wait } });
      const stalled = first.process((await first.claim())!, ship);
      await stall.arrived;
      system.clock.advance(30_000);
      const second = system.worker('b');
      const taken = await second.process((await second.claim())!, ship);
      stall.release();
      const late = await stalled;
      if (taken.status !== 'finished' || late.status !== 'lost') {
        throw new Error(`the zombie round went wrong: second ${taken.status}, first ${late.status}`);
      }
      await system.expectExactlyOnce();
    } finally {
      await system.close();
    }
  });
  return ms;
}

/** Each kind once to warm up (not counted), then `rounds` rounds of each, taking turns. */
export async function runTestkitBench(rounds: number, progress: (line: string) => void): Promise<TestkitFigures> {
  await startRound();
  await resetRound();
  await zombieRound();
  const start: number[] = [];
  const reset: number[] = [];
  const zombie: number[] = [];
  for (let round = 1; round <= rounds; round++) {
    start.push(await startRound());
    reset.push(await resetRound());
    zombie.push(await zombieRound());
    progress(
      `testkit round ${round}/${rounds}: start ${start.at(-1)!.toFixed(1)} ms, reset ${reset.at(-1)!.toFixed(2)} ms, zombie ${zombie.at(-1)!.toFixed(1)} ms`,
    );
  }
  return { rounds, start: summarize(start), reset: summarize(reset), zombie: summarize(zombie) };
}

export function renderTestkit(figures: TestkitFigures): string {
  const cell = (s: Summary | null, digits: number) =>
    s ? `${s.median.toFixed(digits)} [${s.min.toFixed(digits)}..${s.max.toFixed(digits)}]` : '-';
  const verdict = (s: Summary | null, goal: number, strict: boolean) =>
    s === null ? '-' : (strict ? s.median < goal : s.median <= goal) ? 'PASS' : 'MISS';
  const rows = [
    [
      'startSystem() ready',
      cell(figures.start, 1),
      `<= ${TESTKIT_GOALS.startMs}`,
      verdict(figures.start, TESTKIT_GOALS.startMs, false),
    ],
    [
      `reset() after ${JOBS_BEFORE_RESET} jobs`,
      cell(figures.reset, 2),
      `<= ${TESTKIT_GOALS.resetMs}`,
      verdict(figures.reset, TESTKIT_GOALS.resetMs, false),
    ],
    [
      'the zombie test, whole',
      cell(figures.zombie, 1),
      `< ${TESTKIT_GOALS.zombieMs}`,
      verdict(figures.zombie, TESTKIT_GOALS.zombieMs, true),
    ],
  ];
  return [
    `test kit, in process, after the first import and one warm-up round (${figures.rounds} rounds; ms, median [min..max])`,
    table(['', 'ms', 'goal', ''], rows),
  ].join('\n');
}
