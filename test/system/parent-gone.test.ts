// `leasehold start` and its three services end with the process that started them: `npm start`
// in the background stopped by `kill <npm's pid>` (npm passes SIGTERM to the shell it runs the
// script in, which exits without passing it on), and `leasehold start` itself SIGKILLed (its
// services see their IPC channel close). Either way the three ports are free again. Real
// processes, after `npm run build`.
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { connect } from 'node:net';
import { describe, expect, onTestFinished, test } from 'vitest';
import { spawnCli } from '../../platform/spawn.js';
import { CLI, cleanEnv, freePort, ROOT } from '../helpers/processes.js';
import { tempDir } from '../helpers/tmp.js';

/** How long the ports may stay taken after the parent is gone: generous, for a loaded machine. */
const FREED_WITHIN_MS = 30_000;

async function threePorts(): Promise<number[]> {
  const ports = new Set<number>();
  while (ports.size < 3) ports.add(await freePort());
  return [...ports];
}

function startArgs(ports: number[], data: string): string[] {
  const [queue, gateway, receiver] = ports.map(String);
  return ['--queue-port', queue!, '--gateway-port', gateway!, '--receiver-port', receiver!, '--data', data];
}

/** Whether something accepts connections on 127.0.0.1:`port`. */
function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** The ports still taken once they are all free, or when `withinMs` is up. */
async function takenAfter(ports: number[], withinMs: number): Promise<number[]> {
  const deadline = Date.now() + withinMs;
  for (;;) {
    const taken = (await Promise.all(ports.map(async (port) => ((await listening(port)) ? [port] : [])))).flat();
    if (taken.length === 0 || Date.now() > deadline) return taken;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** SIGKILL to every process whose command line names `data` (the run's own folder): what a failed test leaves. */
function killLeftovers(data: string): void {
  const ps = execFileSync('ps', ['-e', '-o', 'pid=,args='], { encoding: 'utf8' });
  for (const line of ps.split('\n')) {
    const [pid, ...args] = line.trim().split(/\s+/);
    if (pid && args.join(' ').includes(data) && Number(pid) !== process.pid) {
      try {
        process.kill(Number(pid), 'SIGKILL');
      } catch {
        // Gone in between.
      }
    }
  }
}

/** Resolves once `child` has printed `pattern` on stdout; rejects with its output if it exits first. */
function printed(child: ChildProcess, output: () => string, pattern: RegExp, timeoutMs = 60_000): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no ${pattern} within ${timeoutMs} ms:\n${output()}`)), timeoutMs);
    const check = () => {
      if (pattern.test(output())) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout!.on('data', () => setImmediate(check));
    child.once('exit', () => {
      clearTimeout(timer);
      reject(new Error(`exited before printing ${pattern}:\n${output()}`));
    });
  });
}

describe('leasehold start ends with its parent', () => {
  test("a backgrounded `npm start` stopped by `kill <npm's pid>` frees the three ports", async () => {
    const data = tempDir('leasehold-npm-start-');
    onTestFinished(() => killLeftovers(data));
    const ports = await threePorts();
    const npm = spawn('npm', ['start', '--', ...startArgs(ports, data), '--log-level', 'warn'], {
      cwd: ROOT,
      env: cleanEnv(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    npm.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    npm.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    await printed(npm, () => output, /Ctrl-C stops all three/);
    expect(await takenAfter(ports, 0)).toEqual(ports);

    process.kill(npm.pid!, 'SIGTERM');
    expect(await takenAfter(ports, FREED_WITHIN_MS), `still listening after the kill; output:\n${output}`).toEqual([]);
  });

  test('`leasehold start` killed with SIGKILL: its services stop on their own and free the ports', async () => {
    const data = tempDir('leasehold-start-kill-');
    onTestFinished(() => killLeftovers(data));
    const ports = await threePorts();
    const start = spawnCli(CLI, 'start', [...startArgs(ports, data), '--log-level', 'warn'], {
      cwd: ROOT,
      env: cleanEnv(),
    });
    await printed(start.process, () => start.stdout(), /Ctrl-C stops all three/);
    expect(await takenAfter(ports, 0)).toEqual(ports);

    // Only the exit: its stderr, shared with the services, stays open while they run.
    const exited = new Promise((resolve) => start.process.once('exit', resolve));
    start.signal('SIGKILL');
    await exited;
    expect(await takenAfter(ports, FREED_WITHIN_MS), `still listening; stderr:\n${start.stderr()}`).toEqual([]);
  });
});
