// Child processes that answer JSON lines, for tests where several real processes share a file.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface } from 'node:readline';

export interface LineChild {
  process: ChildProcessWithoutNullStreams;
  /** Resolves with the next JSON line the child prints on stdout. */
  next<T = unknown>(timeoutMs?: number): Promise<T>;
  send(value: unknown): void;
  stderr(): string;
  stop(): Promise<void>;
}

export function spawnLineChild(script: string, args: string[]): LineChild {
  const child = spawn(process.execPath, [script, ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
  const lines: string[] = [];
  const waiters: Array<(line: string) => void> = [];
  let errText = '';
  child.stderr.on('data', (chunk: Buffer) => (errText += chunk.toString()));
  createInterface({ input: child.stdout }).on('line', (line) => {
    const waiter = waiters.shift();
    if (waiter) waiter(line);
    else lines.push(line);
  });
  return {
    process: child,
    next<T>(timeoutMs = 30_000): Promise<T> {
      const ready = lines.shift();
      if (ready !== undefined) return Promise.resolve(JSON.parse(ready) as T);
      return new Promise<T>((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`no line from ${script} within ${timeoutMs} ms; stderr: ${errText}`)),
          timeoutMs,
        );
        waiters.push((line) => {
          clearTimeout(timer);
          resolve(JSON.parse(line) as T);
        });
      });
    },
    send(value) {
      child.stdin.write(`${JSON.stringify(value)}\n`);
    },
    stderr: () => errText,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.stdin.end();
      const kill = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(kill);
    },
  };
}
