// A leasehold command (or any node script) as a child process: its output collected, its
// "listening on http://..." line awaited, and a stop that waits for the exit. The tests, the demo
// and the benchmark each add what is theirs on top.
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';

export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface SpawnOptions {
  /** Names the process in errors: `queue`, `w1`, `leasehold queue`... */
  name?: string;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** Node's own flags, before the script (`--cpu-prof`...). */
  nodeArgs?: readonly string[];
  /** 'pipe' (the default) keeps it for stderr(); or this process's stderr; or appended to a file. */
  stderr?: 'pipe' | 'inherit' | { file: string };
  /** Its own process group, so a terminal's Ctrl-C reaches only this process, which stops it in turn. */
  detached?: boolean;
  /** Each line it prints on stdout, as it comes. */
  onLine?: (line: string) => void;
  /**
   * An IPC channel to it, which closes when this process exits however it ends (SIGKILL
   * included): a leasehold service started with one stops then, so none outlives its parent.
   */
  ipc?: boolean;
}

/** What a service prints on stdout once it accepts connections. */
const LISTENING = /listening on (http:\/\/\S+)/;

export class NodeProcess {
  readonly name: string;
  readonly process: ChildProcess;
  /** Resolves once it has exited and its output is all read. */
  readonly exited: Promise<ExitInfo>;
  private exitInfo: ExitInfo | undefined;
  private out = '';
  private err = '';
  private readonly stderrFile: string | undefined;

  constructor(args: readonly string[], options: SpawnOptions = {}) {
    this.name = options.name ?? args.join(' ');
    const stderr = options.stderr ?? 'pipe';
    this.stderrFile = typeof stderr === 'object' ? stderr.file : undefined;
    const errFd = typeof stderr === 'object' ? openSync(stderr.file, 'a') : stderr;
    this.process = spawn(process.execPath, [...(options.nodeArgs ?? []), ...args], {
      stdio: options.ipc ? ['ignore', 'pipe', errFd, 'ipc'] : ['ignore', 'pipe', errFd],
      env: options.env ?? process.env,
      ...(options.cwd !== undefined ? { cwd: options.cwd } : {}),
      detached: options.detached ?? false,
    });
    // The child holds its own copy of the log file's descriptor.
    if (typeof errFd === 'number') closeSync(errFd);
    this.process.stdout!.on('data', (chunk: Buffer) => (this.out += chunk.toString()));
    this.process.stderr?.on('data', (chunk: Buffer) => (this.err += chunk.toString()));
    if (options.onLine) createInterface({ input: this.process.stdout! }).on('line', options.onLine);
    this.process.once('exit', (code, signal) => (this.exitInfo = { code, signal }));
    this.exited = new Promise((resolve) => {
      // 'close' comes after 'exit' once stdout and stderr are drained: nothing printed is missed.
      this.process.once('close', (code, signal) => resolve(this.exitInfo ?? { code, signal }));
      this.process.once('error', () => {
        this.exitInfo ??= { code: null, signal: null };
        resolve(this.exitInfo);
      });
    });
  }

  get pid(): number {
    return this.process.pid ?? -1;
  }

  get running(): boolean {
    return this.exitInfo === undefined;
  }

  stdout(): string {
    return this.out;
  }

  /** What it printed on stderr, or the end of the file stderr goes to. */
  stderr(): string {
    if (this.stderrFile === undefined) return this.err;
    try {
      return readFileSync(this.stderrFile, 'utf8');
    } catch {
      return '';
    }
  }

  /** Sends `signal` unless it has already exited. */
  signal(signal: NodeJS.Signals): void {
    if (this.running) this.process.kill(signal);
  }

  /** Sends `signal` (SIGTERM by default) and waits for the exit; SIGKILL after `killAfterMs`, if given. */
  async stop(signal: NodeJS.Signals = 'SIGTERM', killAfterMs?: number): Promise<ExitInfo> {
    this.signal(signal);
    const timer = killAfterMs === undefined ? undefined : setTimeout(() => this.signal('SIGKILL'), killAfterMs);
    const exit = await this.exited;
    clearTimeout(timer);
    return exit;
  }

  /** Resolves with the URL of its "listening on" line; rejects with its stderr if it exits or the time runs out first. */
  listening(timeoutMs = 20_000): Promise<string> {
    return new Promise((resolve, reject) => {
      const stdout = this.process.stdout!;
      const check = () => {
        const match = LISTENING.exec(this.out);
        if (match) finish(() => resolve(match[1]!));
      };
      const finish = (settle: () => void) => {
        clearTimeout(timer);
        stdout.off('data', check);
        settle();
      };
      const fail = (why: string) => finish(() => reject(new Error(`${this.name} ${why}.${this.stderrTail()}`)));
      const timer = setTimeout(() => fail(`printed no "listening on" line within ${timeoutMs} ms`), timeoutMs);
      // After the collecting listener, so the chunk that completes the line is already in `out`.
      stdout.on('data', check);
      void this.exited.then((exit) => fail(`exited before it was listening (${describeExit(exit)})`));
      check();
    });
  }

  private stderrTail(lines = 15): string {
    const text = this.stderr().trimEnd();
    if (!text) return '';
    const where = this.stderrFile === undefined ? 'its stderr' : this.stderrFile;
    return `\n--- last lines of ${where} ---\n${text.split('\n').slice(-lines).join('\n')}`;
  }
}

/** Starts `node ...args`. */
export function spawnNode(args: readonly string[], options: SpawnOptions = {}): NodeProcess {
  return new NodeProcess(args, options);
}

/** Starts `node <cliPath> <command> ...args`: the `leasehold` command, as an operator runs it. */
export function spawnCli(
  cliPath: string,
  command: string,
  args: readonly string[],
  options: SpawnOptions = {},
): NodeProcess {
  return spawnNode([cliPath, command, ...args], { name: `leasehold ${command}`, ...options });
}

export function describeExit(exit: ExitInfo): string {
  return exit.signal ? `signal ${exit.signal}` : `exit code ${exit.code}`;
}
