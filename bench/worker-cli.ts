// End to end with the real worker: `leasehold worker` processes started through the CLI,
// counted by the "finished" lines they print. They cannot be told to run for a slice, so
// between their slices they are frozen with SIGSTOP and the other columns run undisturbed.
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { ThroughputProbe } from './library.js';
import type { SliceResult } from './measure.js';
import { CLI_PATH, peakRssMiB, stopChild, track } from './processes.js';
import type { System } from './services.js';

/** Events that mean a cycle went wrong. */
const TROUBLE = new Set(['refused', 'send_failed', 'call_failed', 'claim_failed', 'lost', 'failed']);

interface Line {
  t?: number;
  event?: string;
  error?: string;
}

export async function openWorkerCliProbe(system: System, workers: number, label: string): Promise<ThroughputProbe> {
  const finished: number[] = [];
  const troubles: { t: number; what: string }[] = [];
  const children: ChildProcess[] = [];
  const started = Array.from({ length: workers }, (_, i) => {
    const child = track(
      spawn(
        process.execPath,
        [
          CLI_PATH,
          'worker',
          '--queue',
          system.queue.url,
          '--gateway',
          system.gateway.url,
          '--name',
          `${label}-${i + 1}`,
          '--poll-ms',
          '20',
        ],
        { stdio: ['ignore', 'pipe', 'ignore'] },
      ),
    );
    children.push(child);
    return new Promise<void>((resolve, reject) => {
      child.once('exit', (code) => reject(new Error(`leasehold worker exited (${code}) before it started`)));
      createInterface({ input: child.stdout! }).on('line', (text) => {
        let line: Line;
        try {
          line = JSON.parse(text) as Line;
        } catch {
          return;
        }
        if (line.event === 'started') resolve();
        else if (line.event === 'finished') finished.push(line.t ?? Date.now());
        else if (TROUBLE.has(line.event ?? ''))
          troubles.push({ t: line.t ?? Date.now(), what: `${line.event}: ${line.error ?? ''}` });
      });
    });
  });
  const signal = (name: NodeJS.Signals) => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill(name);
  };
  try {
    await Promise.all(started);
  } catch (err) {
    signal('SIGKILL');
    throw err;
  }
  signal('SIGSTOP');
  const between = (list: number[], from: number, to: number) => list.filter((t) => t >= from && t < to).length;
  return {
    prepare: (slice) => system.queueDb.prepare(slice, label),
    async slice(ms): Promise<SliceResult> {
      const before = await system.commits();
      const from = Date.now();
      const t0 = performance.now();
      signal('SIGCONT');
      await new Promise((resolve) => setTimeout(resolve, ms));
      signal('SIGSTOP');
      const elapsedMs = performance.now() - t0;
      const to = Date.now();
      // Lines written before the stop may still be in the pipe.
      await new Promise((resolve) => setTimeout(resolve, 20));
      const after = await system.commits();
      const trouble = troubles.filter((x) => x.t >= from && x.t < to);
      return {
        jobs: between(finished, from, to),
        elapsedMs,
        drained: false,
        errors: trouble.length,
        ...(trouble[0] ? { firstError: trouble[0].what } : {}),
        commits: before === null || after === null ? null : after - before,
        statements: null,
      };
    },
    peaks: () => ({ 'leasehold worker process': Math.max(...children.map((c) => peakRssMiB(c.pid!) ?? 0)) }),
    async close() {
      signal('SIGCONT');
      await Promise.all(children.map((child) => stopChild(child)));
    },
  };
}
