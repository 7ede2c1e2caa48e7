// Child processes for the demo and `leasehold start`: `node dist/cli/leasehold.js <command>`, each in
// its own process group (so a terminal's Ctrl-C reaches only the parent, which stops them in
// order), stderr to a log file, stdout read line by line.
import { spawnNode, type ExitInfo, type NodeProcess } from '../platform/spawn.js';

export { describeExit, type ExitInfo } from '../platform/spawn.js';

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
  private readonly process: NodeProcess;
  private readonly logFile: string | undefined;

  constructor(spec: ChildSpec) {
    this.name = spec.name;
    this.logFile = spec.stderr === 'inherit' ? undefined : spec.stderr.file;
    this.process = spawnNode([spec.cliPath, ...spec.args], {
      name: spec.name,
      env: spec.env ?? process.env,
      stderr: spec.stderr,
      detached: true,
      // Its own process group keeps a terminal's signals away from it; the channel ties it to
      // this process instead: a service stops when this process is gone, even after a SIGKILL.
      ipc: true,
      ...(spec.onLine ? { onLine: spec.onLine } : {}),
    });
    this.exited = this.process.exited;
  }

  get pid(): number {
    return this.process.pid;
  }

  get running(): boolean {
    return this.process.running;
  }

  /** Sends a signal if the process is still there. */
  signal(signal: NodeJS.Signals): void {
    this.process.signal(signal);
  }

  /** Resolves with the URL from the child's `... listening on http://...` line. */
  waitForUrl(timeoutMs: number): Promise<string> {
    return this.process.listening(timeoutMs);
  }

  /** SIGTERM (after SIGCONT, in case it is frozen), then SIGKILL if it has not exited in time. */
  async stop(timeoutMs: number): Promise<ExitInfo> {
    this.signal('SIGCONT');
    return this.process.stop('SIGTERM', timeoutMs);
  }

  /** SIGKILL, which also ends a frozen (SIGSTOP) process. */
  async kill(): Promise<ExitInfo> {
    return this.process.stop('SIGKILL');
  }

  /** The end of the child's log, for error messages. */
  logTail(lines = 15): string {
    const text = this.logFile === undefined ? '' : this.process.stderr().trimEnd();
    if (!text) return '';
    return `\n--- last lines of ${this.logFile} ---\n${text.split('\n').slice(-lines).join('\n')}`;
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
