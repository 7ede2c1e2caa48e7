// Child processes for the benchmark: the services started through the real CLI, exactly as an
// operator would, and the peak resident memory the kernel recorded for each (VmHWM).
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

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
export function startService(name: string, command: string, args: string[], logs?: ServiceLogs, timeoutMs = 20_000): Promise<ChildService> {
  const argv = [CLI_PATH, command, '--port', '0', '--log-level', logs?.level ?? 'silent', ...args];
  return startListening(name, `leasehold ${command}`, argv, timeoutMs, logs?.file);
}

const BARE_FRONT_PATH = fileURLToPath(new URL('./bare-front.js', import.meta.url));

/** Starts a reference server of `bare-front.ts` (`queue` or `gateway`) the same way. */
export function startBareFront(name: string, kind: 'queue' | 'gateway', args: string[], timeoutMs = 20_000): Promise<ChildService> {
  return startListening(name, `bare ${kind} front`, [BARE_FRONT_PATH, kind, ...args], timeoutMs);
}

/** Node flags for the services and reference fronts: empty, or a CPU profile each. */
let childNodeFlags: string[] = [];

/** From now on, every service and reference front writes a V8 CPU profile into `dir` when it stops. */
export function profileChildrenInto(dir: string): void {
  mkdirSync(dir, { recursive: true });
  childNodeFlags = ['--cpu-prof', `--cpu-prof-dir=${dir}`];
}

async function startListening(name: string, what: string, argv: string[], timeoutMs: number, stderrFile?: string): Promise<ChildService> {
  const logFd = stderrFile === undefined ? undefined : openSync(stderrFile, 'a');
  const child = track(spawn(process.execPath, [...childNodeFlags, ...argv], { stdio: ['ignore', 'pipe', logFd ?? 'pipe'] }));
  if (logFd !== undefined) closeSync(logFd); // the child holds its own copy
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4_000);
  });
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => fail(new Error(`timed out after ${timeoutMs} ms`)), timeoutMs);
    const fail = (err: Error) => {
      clearTimeout(timer);
      child.kill('SIGKILL');
      const said = stderrFile === undefined ? stderr : tailOf(stderrFile);
      reject(new Error(`${name} (${what}) did not start: ${err.message}\n${said}`));
    };
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const match = /listening on (http:\/\/\S+)/.exec(out);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]!);
      }
    });
    child.once('exit', (code, signal) => fail(new Error(`exited with ${signal ?? code}`)));
    child.once('error', fail);
  });
  child.stdout!.resume();
  return { name, url, pid: child.pid!, stop: () => stopChild(child) };
}

/** The end of a log file, or nothing when it is gone (an interrupted run removes its folder). */
function tailOf(file: string): string {
  try {
    return readFileSync(file, 'utf8').slice(-4_000);
  } catch {
    return '';
  }
}

/** A bare node:http server that answers every request with a small JSON body: the floor of an HTTP hop. */
const ECHO_SERVER = `require('node:http').createServer((req, res) => {
  req.resume();
  req.on('end', () => { res.setHeader('content-type', 'application/json'); res.end('{"ok":true}'); });
}).listen(0, '127.0.0.1', function () { console.log('listening on http://127.0.0.1:' + this.address().port); });
process.on('SIGTERM', () => process.exit(0));`;

export async function startEchoServer(timeoutMs = 20_000): Promise<ChildService> {
  const child = track(spawn(process.execPath, ['-e', ECHO_SERVER], { stdio: ['ignore', 'pipe', 'pipe'] }));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('the bare node:http server did not start')), timeoutMs);
    child.stdout!.once('data', (chunk: Buffer) => {
      clearTimeout(timer);
      const match = /listening on (http:\/\/\S+)/.exec(chunk.toString());
      if (match) resolve(match[1]!);
      else reject(new Error(`the bare node:http server said: ${chunk.toString()}`));
    });
  });
  child.stdout!.resume();
  child.stderr!.resume();
  return { name: 'bare node:http', url, pid: child.pid!, stop: () => stopChild(child) };
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
