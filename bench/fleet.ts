// Worker processes driven from the benchmark over IPC: each runs its loops for the same window,
// started at the same instant, and reports what it completed. Kept alive across rounds.
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { LoopResult } from './loops.js';
import { nameProfiledChild, nodeFlags, peakRssMiB, stopChild, track } from './processes.js';

const WORKER_PATH = fileURLToPath(new URL('./worker.js', import.meta.url));

/** What a worker process does in one cycle, on the lease in hand. */
export type WorkerTarget =
  /** finish and claim the next on the store, opened in the worker process itself */
  | { mode: 'library'; db: string }
  /** send through the gateway, then finish and claim the next over HTTP */
  | { mode: 'e2e'; queueUrl: string; gatewayUrl: string };

export type ToWorker =
  | ({ type: 'init'; name: string } & WorkerTarget)
  | { type: 'run'; startAt: number; windowMs: number; concurrency: number }
  | { type: 'stop' };

/** A window's cycles, and the statements and CPU time of the worker process meanwhile. */
export interface WindowResult extends LoopResult {
  statements: number;
  cpuMs: number;
}

export type FromWorker =
  { type: 'ready' } | { type: 'done'; result: WindowResult } | { type: 'failed'; message: string };

export class Fleet {
  private constructor(private readonly children: ChildProcess[]) {}

  static async start(size: number, name: string, target: WorkerTarget): Promise<Fleet> {
    const children = Array.from({ length: size }, (_, i) => {
      const child = track(
        fork(WORKER_PATH, [], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'], execArgv: nodeFlags() }),
      );
      nameProfiledChild(child.pid, `${name}-${i + 1} (benchmark worker, ${target.mode})`);
      return child;
    });
    const fleet = new Fleet(children);
    try {
      await Promise.all(
        children.map((child, i) => fleet.ask(child, { type: 'init', name: `${name}-${i + 1}`, ...target }, 'ready')),
      );
    } catch (err) {
      await fleet.stop();
      throw err;
    }
    return fleet;
  }

  get pids(): number[] {
    return this.children.map((child) => child.pid!);
  }

  /** Runs one window in every worker at once; `concurrency` loops per worker. */
  async run(windowMs: number, concurrency = 1): Promise<WindowResult> {
    // Far enough ahead for the message to reach every worker before the window opens.
    const startAt = Date.now() + 30;
    const results = await Promise.all(
      this.children.map(async (child) => {
        const reply = await this.ask(child, { type: 'run', startAt, windowMs, concurrency }, 'done');
        return (reply as Extract<FromWorker, { type: 'done' }>).result;
      }),
    );
    const firstError = results.find((r) => r.firstError)?.firstError;
    return {
      jobs: results.reduce((sum, r) => sum + r.jobs, 0),
      // The longest of the workers' windows.
      elapsedMs: Math.max(...results.map((r) => r.elapsedMs)),
      drained: results.some((r) => r.drained),
      errors: results.reduce((sum, r) => sum + r.errors, 0),
      ...(firstError ? { firstError } : {}),
      statements: results.reduce((sum, r) => sum + r.statements, 0),
      cpuMs: results.reduce((sum, r) => sum + r.cpuMs, 0),
    };
  }

  peakRssMiB(): number | null {
    const peaks = this.pids.map(peakRssMiB).filter((v): v is number => v !== null);
    return peaks.length > 0 ? Math.max(...peaks) : null;
  }

  async stop(): Promise<void> {
    await Promise.all(
      this.children.map((child) => {
        const asked = child.connected;
        if (asked) child.send({ type: 'stop' } satisfies ToWorker);
        return stopChild(child, 5_000, !asked);
      }),
    );
  }

  private ask(child: ChildProcess, message: ToWorker, expect: FromWorker['type']): Promise<FromWorker> {
    return new Promise((resolve, reject) => {
      const onMessage = (reply: FromWorker) => {
        cleanup();
        if (reply.type === expect) resolve(reply);
        else reject(new Error(`bench worker ${child.pid}: ${reply.type === 'failed' ? reply.message : reply.type}`));
      };
      const onExit = (code: number | null) => {
        cleanup();
        reject(new Error(`bench worker ${child.pid} exited (${code}) while asked to ${message.type}`));
      };
      const cleanup = () => {
        child.off('message', onMessage);
        child.off('exit', onExit);
      };
      child.on('message', onMessage);
      child.once('exit', onExit);
      child.send(message);
    });
  }
}
