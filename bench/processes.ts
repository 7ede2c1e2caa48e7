// Child processes for the benchmark: the services started through the real CLI, exactly as an
// operator would, and the peak resident memory the kernel recorded for each (VmHWM).
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { spawnCli, spawnNode, type NodeProcess, type SpawnOptions } from '../platform/spawn.js';

export const CLI_PATH = fileURLToPath(new URL('../cli/leasehold.js', import.meta.url));

/** Every child still running, so none outlives the benchmark if it is interrupted. */
const live = new Set<ChildProcess>();

export function track(child: ChildProcess): ChildProcess {
  live.add(child);
  child.once('exit', () => live.delete(child));
  return child;
}

/** Kills every child still running; synchronous, so it may run in an 'exit' handler. */
export function killAll(): void {
  for (const child of live) child.kill('SIGKILL');
}

export interface ChildService {
  name: string;
  url: string;
  pid: number;
  stop(): Promise<void>;
}

export interface ServiceLogs {
  level: string;
  /** The file the service's stderr (its JSON log lines) goes to, as an operator would keep it. */
  file: string;
}

/**
 * Starts `leasehold <command> --port 0 ...args` and waits for its "listening on" line. Logging
 * is silenced unless `logs` says where it goes.
 */
export function startService(
  name: string,
  command: string,
  args: string[],
  logs?: ServiceLogs,
  timeoutMs = 20_000,
): Promise<ChildService> {
  const argv = ['--port', '0', '--log-level', logs?.level ?? 'silent', ...args];
  return listening(
    name,
    spawnCli(CLI_PATH, command, argv, childOptions(`${name} (leasehold ${command})`, logs?.file)),
    timeoutMs,
  );
}

const BARE_FRONT_PATH = fileURLToPath(new URL('./bare-front.js', import.meta.url));

/** Starts a reference server of `bare-front.ts` (`queue` or `gateway`) the same way. */
export function startBareFront(
  name: string,
  kind: 'queue' | 'gateway',
  args: string[],
  timeoutMs = 20_000,
): Promise<ChildService> {
  return listening(
    name,
    spawnNode([BARE_FRONT_PATH, kind, ...args], childOptions(`${name} (bare ${kind} front)`)),
    timeoutMs,
  );
}

/** Node flags for the services and reference fronts: empty, or a CPU profile each. */
let childNodeFlags: string[] = [];

/** From now on, every service and reference front writes a V8 CPU profile into `dir` when it stops. */
export function profileChildrenInto(dir: string): void {
  mkdirSync(dir, { recursive: true });
  childNodeFlags = ['--cpu-prof', `--cpu-prof-dir=${dir}`];
}

function childOptions(name: string, stderrFile?: string): SpawnOptions {
  return { name, nodeArgs: childNodeFlags, ...(stderrFile === undefined ? {} : { stderr: { file: stderrFile } }) };
}

/** Tracks the child from its start, so killAll reaches it, and waits for its "listening on" line. */
async function listening(name: string, child: NodeProcess, timeoutMs: number): Promise<ChildService> {
  track(child.process);
  try {
    const url = await child.listening(timeoutMs);
    return { name, url, pid: child.pid, stop: () => stopChild(child.process) };
  } catch (err) {
    child.signal('SIGKILL');
    throw err;
  }
}

/** A bare node:http server that answers every request with a small JSON body: the floor of an HTTP hop. */
const ECHO_SERVER = `require('node:http').createServer((req, res) => {
  req.resume();
  req.on('end', () => { res.setHeader('content-type', 'application/json'); res.end('{"ok":true}'); });
}).listen(0, '127.0.0.1', function () { console.log('listening on http://127.0.0.1:' + this.address().port); });
process.on('SIGTERM', () => process.exit(0));`;

export function startEchoServer(timeoutMs = 20_000): Promise<ChildService> {
  return listening('bare node:http', spawnNode(['-e', ECHO_SERVER], { name: 'the bare node:http server' }), timeoutMs);
}

/** SIGTERM (unless `signal` is false: it was asked to stop), then SIGKILL after `graceMs`. */
export function stopChild(child: ChildProcess, graceMs = 5_000, signal = true): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    if (signal) child.kill('SIGTERM');
  });
}

/** Peak resident set size of a running process in MiB, from /proc (Linux); null elsewhere. */
export function peakRssMiB(pid: number): number | null {
  try {
    const match = /^VmHWM:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) / 1024 : null;
  } catch {
    return null;
  }
}
