// Child processes for the demo and `leasehold start`: `node dist/cli/leasehold.js <command>`, each in
// its own process group (so a terminal's Ctrl-C reaches only the parent, which stops them in
// order), stderr to a log file, stdout read line by line.
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';

export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface ChildSpec {
  /** Shown in the timeline and in errors: `queue`, `w1`... */
  name: string;
  cliPath: string;
  args: string[];
  env?: NodeJS.ProcessEnv;
  /** Where the child's stderr (its JSON logs) goes: a file, or this process's stderr. */
  stderr: { file: string } | 'inherit';
  /** Each line the child prints on stdout. */
  onLine?: (line: string) => void;
}

export class Child {
  readonly name: string;
  readonly exited: Promise<ExitInfo>;
  private readonly child: ChildProcess;
  private readonly logFile: string | undefined;
  private exit: ExitInfo | undefined;
  private readonly lineListeners = new Set<(line: string) => void>();

  constructor(spec: ChildSpec) {
    this.name = spec.name;
    this.logFile = spec.stderr === 'inherit' ? undefined : spec.stderr.file;
    const errFd = spec.stderr === 'inherit' ? 'inherit' : openSync(spec.stderr.file, 'a');
    this.child = spawn(process.execPath, [spec.cliPath, ...spec.args], {
      stdio: ['ignore', 'pipe', errFd],
      env: spec.env ?? process.env,
      detached: true,
    });
    if (typeof errFd === 'number') closeSync(errFd);
    this.exited = new Promise((resolve) => {
      this.child.once('exit', (code, signal) => {
        this.exit = { code, signal };
        resolve(this.exit);
      });
      this.child.once('error', () => {
        this.exit ??= { code: null, signal: null };
        resolve(this.exit);
      });
    });
    createInterface({ input: this.child.stdout! }).on('line', (line) => {
      spec.onLine?.(line);
      for (const listener of this.lineListeners) listener(line);
    });
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  get running(): boolean {
    return this.exit === undefined;
  }

  /** Sends a signal if the process is still there. */
  signal(signal: NodeJS.Signals): void {
    if (this.running) this.child.kill(signal);
  }

  /** Resolves with the URL from the child's `... listening on http://...` line. */
  waitForUrl(timeoutMs: number): Promise<string> {
    return new Promise((resolve, reject) => {
      const done = (fn: () => void) => {
        clearTimeout(timer);
        this.lineListeners.delete(onLine);
        fn();
      };
      const onLine = (line: string) => {
        const match = /listening on (http:\/\/\S+)/.exec(line);
        if (match) done(() => resolve(match[1]!));
      };
      const timer = setTimeout(
        () => done(() => reject(new Error(`${this.name} printed no URL within ${timeoutMs} ms.${this.logTail()}`))),
        timeoutMs,
      );
      this.lineListeners.add(onLine);
      void this.exited.then((exit) =>
        done(() => reject(new Error(`${this.name} exited before it was ready (${describeExit(exit)}).${this.logTail()}`))),
      );
    });
  }

  /** SIGTERM (after SIGCONT, in case it is frozen), then SIGKILL if it has not exited in time. */
  async stop(timeoutMs: number): Promise<ExitInfo> {
    if (!this.running) return this.exit!;
    this.signal('SIGCONT');
    this.signal('SIGTERM');
    const timer = setTimeout(() => this.signal('SIGKILL'), timeoutMs);
    const exit = await this.exited;
    clearTimeout(timer);
    return exit;
  }

  /** SIGKILL, which also ends a frozen (SIGSTOP) process. */
  async kill(): Promise<ExitInfo> {
    this.signal('SIGKILL');
    return this.exited;
  }

  /** The end of the child's log, for error messages. */
  logTail(lines = 15): string {
    if (!this.logFile) return '';
    try {
      const text = readFileSync(this.logFile, 'utf8').trimEnd();
      if (!text) return '';
      return `\n--- last lines of ${this.logFile} ---\n${text.split('\n').slice(-lines).join('\n')}`;
    } catch {
      return '';
    }
  }
}

/** Every child started for one run, killed together — also when this process exits abruptly. */
export class ChildGroup {
  private readonly children: Child[] = [];
  private readonly onExit = () => this.killNow();

  constructor() {
    process.on('exit', this.onExit);
  }

  spawn(spec: ChildSpec): Child {
    const child = new Child(spec);
    this.children.push(child);
    return child;
  }

  get all(): readonly Child[] {
    return this.children;
  }

  /** Synchronous last resort: SIGKILL to whatever is still running. */
  killNow(): void {
    for (const child of this.children) child.signal('SIGKILL');
  }

  /** Stops the given children (default: all) with SIGTERM, in parallel, SIGKILL after `timeoutMs`. */
  async stop(timeoutMs: number, children: readonly Child[] = this.children): Promise<void> {
    await Promise.all(children.map((child) => child.stop(timeoutMs)));
  }

  /** Ends every child and forgets the exit hook. */
  async dispose(timeoutMs: number): Promise<void> {
    await this.stop(timeoutMs);
    process.off('exit', this.onExit);
  }
}

export function describeExit(exit: ExitInfo): string {
  return exit.signal ? `signal ${exit.signal}` : `exit code ${exit.code}`;
}
