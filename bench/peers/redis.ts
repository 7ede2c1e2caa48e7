// BullMQ's broker for the peer columns: a `redis-server` of this machine's, started on a free
// port with its own data folder and an append-only file fsync'd on every write
// (`--appendonly yes --appendfsync always`, no RDB snapshots), stopped and removed after.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { peakRssMiB, stopChild, track } from '../processes.js';

export interface RedisServer {
  port: number;
  pid: number;
  peakRssMiB(): number | null;
  stop(): Promise<void>;
}

/** The `redis-server` version on PATH (`7.0.15`), or null when there is none. */
export function redisServerVersion(): string | null {
  const probe = spawnSync('redis-server', ['--version'], { encoding: 'utf8' });
  if (probe.error || probe.status !== 0) return null;
  return /v=(\S+)/.exec(probe.stdout)?.[1] ?? 'unknown';
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

export async function startRedis(parentDir: string, timeoutMs = 20_000): Promise<RedisServer> {
  const port = await freePort();
  const dir = mkdtempSync(join(parentDir, 'redis-'));
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir];
  args.push('--appendonly', 'yes', '--appendfsync', 'always', '--save', '', '--protected-mode', 'no');
  const child = track(spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] }));
  const stop = async () => {
    await stopChild(child);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await new Promise<void>((resolve, reject) => {
      let output = '';
      const timer = setTimeout(
        () => reject(new Error(`redis-server did not start within ${timeoutMs} ms:\n${output}`)),
        timeoutMs,
      );
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`redis-server exited (${code}) before it was ready:\n${output}`));
      });
      child.stdout!.on('data', (chunk: Buffer) => {
        output += chunk.toString();
        if (output.includes('Ready to accept connections')) {
          clearTimeout(timer);
          resolve();
        }
      });
      child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    });
  } catch (err) {
    await stop();
    throw err;
  }
  return { port, pid: child.pid!, peakRssMiB: () => peakRssMiB(child.pid!), stop };
}
