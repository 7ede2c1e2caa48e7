// Child processes for the benchmark: the services started through the real CLI, exactly as an
// operator would, each counting its statements and requests (count-preload.ts) for the
// benchmark to read, and the peak resident memory the kernel recorded for each (VmHWM).
import type { ChildProcess } from 'node:child_process';
import { appendFileSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { spawnCli, spawnNode, type NodeProcess, type SpawnOptions } from '../platform/spawn.js';
import { COUNTS_LINE, type ProcessCounts } from './counting.js';

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
  /** Its statements and requests so far. */
  counts(): Promise<ProcessCounts>;
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
  logs ??= serviceLogs && {
    level: serviceLogs.level,
    file: join(serviceLogs.dir, `${name.replace(/[^A-Za-z0-9_-]+/g, '-').replace(/-+$/, '')}-${++serviceLogFiles}.log`),
  };
  const argv = ['--port', '0', '--log-level', logs?.level ?? 'silent', ...args];
  const counts = new CountsReader();
  return listening(
    name,
    spawnCli(CLI_PATH, command, argv, childOptions(`${name} (leasehold ${command})`, counts, logs?.file)),
    counts,
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
  const counts = new CountsReader();
  return listening(
    name,
    spawnNode([BARE_FRONT_PATH, kind, ...args], childOptions(`${name} (bare ${kind} front)`, counts)),
    counts,
    timeoutMs,
  );
}

/** Starts a compiled benchmark script (`path`) the same way: counted, and listening once it says so. */
export function startScript(name: string, path: string, args: string[], timeoutMs = 20_000): Promise<ChildService> {
  const counts = new CountsReader();
  return listening(name, spawnNode([path, ...args], childOptions(name, counts)), counts, timeoutMs);
}

/** Node flags for the services and reference fronts: `--node-flags`, then a CPU profile each if asked. */
let childNodeFlags: string[] = [];
let profileDir: string | undefined;

/** From now on, every service and reference front writes a V8 CPU profile into `dir` when it stops. */
export function profileChildrenInto(dir: string): void {
  mkdirSync(dir, { recursive: true });
  profileDir = dir;
  childNodeFlags = [...childNodeFlags, '--cpu-prof', `--cpu-prof-dir=${dir}`];
}

/** Where services log, when not silent (`--service-log-level`): each to a file of its own in `dir`. */
let serviceLogs: { level: string; dir: string } | undefined;
let serviceLogFiles = 0;

/** From now on, every service logs at `level`, each to its own file in `dir`, as an operator would keep them. */
export function logServicesInto(level: string, dir: string): void {
  mkdirSync(dir, { recursive: true });
  serviceLogs = { level, dir };
}

/** From now on, every Node.js child the benchmark starts runs with `flags` too (`--node-flags`). */
export function passNodeFlags(flags: readonly string[]): void {
  childNodeFlags = [...childNodeFlags, ...flags];
}

/** Where profiles are written, which process each pid was (cpu-profiles.ts reads it): one JSON line each. */
export const PROCESS_NAMES_FILE = 'processes.jsonl';

/** Notes the name of a child whose profile goes into the profile folder, if profiling. */
export function nameProfiledChild(pid: number | undefined, name: string): void {
  if (profileDir !== undefined && pid !== undefined)
    appendFileSync(join(profileDir, PROCESS_NAMES_FILE), `${JSON.stringify({ pid, name })}\n`);
}

/** Node flags for every child that runs leasehold or benchmark code (the CPU profile, if asked). */
export function nodeFlags(): string[] {
  return [...childNodeFlags];
}

const COUNT_PRELOAD = pathToFileURL(fileURLToPath(new URL('./count-preload.js', import.meta.url))).href;

function childOptions(name: string, counts: CountsReader, stderrFile?: string): SpawnOptions {
  return {
    name,
    nodeArgs: [...childNodeFlags, '--import', COUNT_PRELOAD],
    onLine: (line) => counts.line(line),
    ...(stderrFile === undefined ? {} : { stderr: { file: stderrFile } }),
  };
}

/** Asks a service for its counts (SIGUSR2) and reads the line it prints in answer. */
class CountsReader {
  private waiting: { resolve(counts: ProcessCounts): void; timer: NodeJS.Timeout }[] = [];
  process: NodeProcess | undefined;

  line(text: string): void {
    if (!text.startsWith(COUNTS_LINE)) return;
    const next = this.waiting.shift();
    if (!next) return;
    clearTimeout(next.timer);
    next.resolve(JSON.parse(text.slice(COUNTS_LINE.length)) as ProcessCounts);
  }

  read(): Promise<ProcessCounts> {
    const child = this.process;
    if (!child?.running) return Promise.reject(new Error('the service is not running'));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting = this.waiting.filter((w) => w.timer !== timer);
        reject(new Error(`${child.name} did not print its counts within 5 s`));
      }, 5_000);
      this.waiting.push({ resolve, timer });
      child.signal('SIGUSR2');
    });
  }
}

/** Tracks the child from its start, so killAll reaches it, and waits for its "listening on" line. */
async function listening(
  name: string,
  child: NodeProcess,
  counts: CountsReader,
  timeoutMs: number,
): Promise<ChildService> {
  track(child.process);
  nameProfiledChild(child.pid, name);
  counts.process = child;
  try {
    const url = await child.listening(timeoutMs);
    return { name, url, pid: child.pid, counts: () => counts.read(), stop: () => stopChild(child.process) };
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
  return listening(
    'bare node:http',
    spawnNode(['-e', ECHO_SERVER], { name: 'the bare node:http server' }),
    new CountsReader(),
    timeoutMs,
  );
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
