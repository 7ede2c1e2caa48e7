// `leasehold start`: the three services together in the foreground, on fixed ports with their
// data in one folder, until Ctrl-C; then the gateway stops first, since it calls the others.
import { join, resolve } from 'node:path';
import { makeDirectory } from '../platform/directories.js';
import { ChildGroup, describeExit, type Child } from './processes.js';
import { startServiceProcesses, type ServiceUrls } from './services.js';

export interface StartOptions {
  cliPath: string;
  host: string;
  ports: { queue: number; gateway: number; receiver: number };
  dataDir: string;
  logLevel: string;
}

export interface RunningServices {
  urls: ServiceUrls;
  /** Resolves when one of them exits on its own: its name and how it ended. */
  exited: Promise<string>;
  stop(): Promise<void>;
}

export async function startServices(options: StartOptions): Promise<RunningServices> {
  const dataDir = resolve(options.dataDir);
  try {
    makeDirectory(dataDir);
  } catch (err) {
    // A file in the way, or a folder this process may not write: say which flag to change.
    throw new Error(
      `cannot make the --data folder ${options.dataDir} (${(err as Error).message}); pick a folder this process may write to, with --data`,
    );
  }
  const group = new ChildGroup();
  let stopping = false;
  const stop = async () => {
    stopping = true;
    const [gateway, ...rest] = ['gateway', 'queue', 'receiver'].map((name) => group.all.find((c) => c.name === name));
    if (gateway) await group.stop(15_000, [gateway]);
    await group.stop(
      15_000,
      rest.filter((c): c is Child => c !== undefined),
    );
    await group.dispose(5_000);
  };
  let started;
  try {
    started = await startServiceProcesses({
      cliPath: options.cliPath,
      group,
      host: options.host,
      ports: options.ports,
      db: { queue: join(dataDir, 'queue.sqlite'), receiver: join(dataDir, 'receiver.sqlite') },
      logLevel: options.logLevel,
      stderr: () => 'inherit',
      flagNames: (name) => ({ '--port': `--${name}-port` }),
    });
  } catch (err) {
    await stop();
    throw err;
  }
  const exited = Promise.race(
    Object.values(started.children).map(async (child) => {
      const exit = await child.exited;
      return stopping ? new Promise<string>(() => {}) : `${child.name} exited on its own (${describeExit(exit)})`;
    }),
  );
  return { urls: started.urls, exited, stop };
}
