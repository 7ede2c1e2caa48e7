// Leasehold services as real child processes (`node dist/cli/leasehold.js <service> ...`): started
// on the flags given, resolved once they print the URL they listen on, SIGKILLed after the test,
// and their output printed when the test fails.
import type { ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { onTestFinished } from 'vitest';
import { spawnCli, type ExitInfo } from '../../platform/spawn.js';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const CLI = join(ROOT, 'dist', 'cli', 'leasehold.js');

export interface Running {
  child: ChildProcess;
  url: string;
  stdout(): string;
  stderr(): string;
  exited: Promise<ExitInfo>;
  /** Sends `signal` (SIGTERM by default) unless it already exited, and waits for the exit. */
  stop(signal?: NodeJS.Signals): Promise<ExitInfo>;
}

/** Runs `leasehold ...args` to completion (for --help, bad flags, failures to start). */
export async function runCli(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const [command = '', ...rest] = args;
  const child = spawnCli(CLI, command, rest, { cwd: ROOT, env: { ...cleanEnv(), ...env } });
  onTestFinished(() => child.signal('SIGKILL'));
  const { code } = await child.exited;
  return { code, stdout: child.stdout(), stderr: child.stderr() };
}

/** Starts `leasehold <service> ...args` and resolves once it printed the URL it listens on. */
export async function startProcess(
  service: string,
  args: string[],
  env: Record<string, string> = {},
): Promise<Running> {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run "npm run build" before these tests.`);
  const child = spawnCli(CLI, service, args, { cwd: ROOT, env: { ...cleanEnv(), ...env } });
  onTestFinished(async ({ task }) => {
    if (task.result?.state === 'fail')
      console.error(`${service} ${args.join(' ')}\nstdout:\n${child.stdout()}\nstderr:\n${child.stderr()}`);
    await child.stop('SIGKILL');
  });
  const url = await child.listening(20_000);
  return {
    child: child.process,
    url,
    stdout: () => child.stdout(),
    stderr: () => child.stderr(),
    exited: child.exited,
    stop: (signal = 'SIGTERM') => child.stop(signal),
  };
}

/**
 * The environment without leasehold's variables (LEASEHOLD_SECRET, LEASEHOLD_PORT...) from the
 * shell running the tests: each test says what its processes get.
 */
export function cleanEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('LEASEHOLD_')));
}

/**
 * The environment of a command run as a user would: none of the npm variables of the `npm test`
 * that may be running this file (npm_config_local_prefix would point npm at this repository),
 * and none of leasehold's own.
 */
export function userEnvironment(): NodeJS.ProcessEnv {
  const keep = new Set(['npm_config_cache', 'npm_config_registry', 'npm_config_userconfig']);
  return Object.fromEntries(
    Object.entries(process.env).filter(
      ([key]) => !(key.startsWith('npm_') && !keep.has(key)) && !key.startsWith('LEASEHOLD_') && key !== 'INIT_CWD',
    ),
  );
}

/** A port something is listening on, held until the test ends. */
export async function portInUse(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  onTestFinished(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return (server.address() as AddressInfo).port;
}

/** A port that was free a moment ago (another process may take it in between, rarely). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
