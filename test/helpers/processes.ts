// Leasehold services as real child processes (`node dist/cli/leasehold.js <service> ...`): started
// on the flags given, resolved once they print the URL they listen on, SIGKILLed after the test,
// and their output printed when the test fails.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { onTestFinished } from 'vitest';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const CLI = join(ROOT, 'dist', 'cli', 'leasehold.js');

export interface Running {
  child: ChildProcess;
  url: string;
  stdout(): string;
  stderr(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Sends `signal` (SIGTERM by default) unless it already exited, and waits for the exit. */
  stop(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Runs the CLI to completion (for --help and bad flags). */
export function runCli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [CLI, ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], env: cleanEnv() });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

/** Starts `leasehold <service> ...args` and resolves once it printed the URL it listens on. */
export async function startProcess(service: string, args: string[], env: Record<string, string> = {}): Promise<Running> {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run "npm run build" before these tests.`);
  const child = spawn(process.execPath, [CLI, service, ...args], { cwd: ROOT, env: { ...cleanEnv(), ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  const stop = async (signal: NodeJS.Signals = 'SIGTERM') => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    return exited;
  };
  onTestFinished(async ({ task }) => {
    if (task.result?.state === 'fail') console.error(`${service} ${args.join(' ')}\nstdout:\n${stdout}\nstderr:\n${stderr}`);
    await stop('SIGKILL');
  });
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${service}: no "listening on" line within 20 s; stderr:\n${stderr}`)), 20_000);
    const check = () => {
      const match = /listening on (http:\/\/\S+)/.exec(stdout);
      if (!match) return;
      clearTimeout(timer);
      resolve(match[1]!);
    };
    child.stdout!.on('data', check);
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`${service} exited (${code ?? signal}) before listening; stderr:\n${stderr}`));
    });
  });
  return { child, url, stdout: () => stdout, stderr: () => stderr, exited, stop };
}

/** The environment without a secret or log level inherited from the shell running the tests. */
function cleanEnv(): NodeJS.ProcessEnv {
  const { LEASEHOLD_SECRET: _secret, LEASEHOLD_LOG_LEVEL: _level, ...env } = process.env;
  return env;
}
