// A leasehold service as a real child process (`node dist/queue/cli.js <service> ...`),
// started on a free port; resolves once it prints the URL it listens on.
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';

export const CLI = fileURLToPath(new URL('../../dist/queue/cli.js', import.meta.url));

export interface ServiceProcess {
  url: string;
  child: ChildProcess;
  output(): string;
  /** Sends `signal` and waits for the process to exit. */
  kill(signal?: NodeJS.Signals): Promise<void>;
}

export function startServiceProcess(service: string, args: string[], timeoutMs = 20_000): Promise<ServiceProcess> {
  const child = spawn(process.execPath, [CLI, service, '--port', '0', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${service} did not print its URL within ${timeoutMs} ms; output: ${output}`));
    }, timeoutMs);
    const early = (code: number | null, signal: NodeJS.Signals | null) => {
      clearTimeout(timer);
      reject(new Error(`${service} exited early (code ${code}, signal ${signal}); output: ${output}`));
    };
    child.once('exit', early);
    createInterface({ input: child.stdout! }).on('line', (line) => {
      output += `${line}\n`;
      const match = /listening on (http:\/\/\S+)/.exec(line);
      if (!match) return;
      clearTimeout(timer);
      child.off('exit', early);
      resolve({
        url: match[1]!,
        child,
        output: () => output,
        kill: async (signal = 'SIGTERM') => {
          if (child.exitCode === null && child.signalCode === null) child.kill(signal);
          await exited;
        },
      });
    });
  });
}
