// The start-up path the three services share (platform/service-main.ts), on a toy service run as
// a real process from dist/: flags checked as usage errors naming the flag, the URL printed, the
// ready line logged with the database masked, a clean stop on SIGTERM and when the parent's IPC
// channel closes, the force-exit timer, the second signal. Run after `npm run build`.
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { spawnNode, type NodeProcess } from '../../platform/spawn.js';
import { cleanEnv, ROOT } from '../helpers/processes.js';
import { tempDir } from '../helpers/tmp.js';

const DIST = join(ROOT, 'dist', 'platform');

/**
 * `leasehold toy`: a --port, a --db, a --secret, a --wait-ms that must be below 60000, and a
 * --close-ms for how long its close takes. Its start fails when --port is 1.
 */
const TOY = `
import { createServer } from 'node:http';
import { leaseholdCommand, portOption, logLevelOption, integerAtLeast, headersTimeoutOption, requestTimeoutOption, maxConnectionsOption } from '${DIST}/flags.js';
import { serviceAction } from '${DIST}/service-main.js';

const command = leaseholdCommand('queue')
  .addOption(portOption(0))
  .option('--host <host>', 'host', '127.0.0.1')
  .option('--db <db>', 'db', './toy.sqlite')
  .option('--secret <secret>', 'secret')
  .option('--wait-ms <ms>', 'wait', integerAtLeast(0), 0)
  .option('--close-ms <ms>', 'close', integerAtLeast(0), 0)
  .option('--force-ms <ms>', 'force', integerAtLeast(1), 10000)
  .addOption(headersTimeoutOption())
  .addOption(requestTimeoutOption())
  .addOption(maxConnectionsOption())
  .addOption(logLevelOption())
  .action(serviceAction({
    service: 'queue',
    renamed: { waitLimitMs: '--wait-ms' },
    resolve: (flags) => {
      if (flags.waitMs >= 60000) throw new RangeError('waitLimitMs must be below 60000, not ' + flags.waitMs + '.');
      return { port: flags.port, host: flags.host, waitMs: flags.waitMs, closeMs: flags.closeMs, forceMs: flags.forceMs };
    },
    start: async (options, logger) => {
      if (options.port === 1) throw Object.assign(new Error('listen EACCES'), { code: 'EACCES', syscall: 'listen', port: 1 });
      const server = createServer((_req, res) => res.end('ok'));
      await new Promise((resolve) => server.listen(options.port, options.host, resolve));
      logger.debug('toy listening');
      return {
        url: 'http://127.0.0.1:' + server.address().port,
        close: async () => {
          await new Promise((resolve) => setTimeout(resolve, options.closeMs));
          await new Promise((resolve) => server.close(resolve));
        },
      };
    },
    ready: (options) => ({ waitMs: options.waitMs }),
    forceExitMs: (options) => options.forceMs,
  }));
await command.parseAsync(process.argv);
`;

function toyScript(): string {
  if (!existsSync(join(DIST, 'service-main.js'))) {
    throw new Error(`${DIST}/service-main.js is missing: run "npm run build" before these tests.`);
  }
  const file = join(tempDir('leasehold-toy-'), 'toy.mjs');
  writeFileSync(file, TOY);
  return file;
}

function toy(args: string[]): NodeProcess {
  return spawnNode([toyScript(), ...args], { name: 'toy', env: cleanEnv(), cwd: ROOT });
}

function logLines(child: NodeProcess): Array<Record<string, unknown>> {
  return child
    .stderr()
    .trim()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

describe('serviceAction', () => {
  test('prints one listening line, logs the ready line with the db masked, and stops on SIGTERM with exit 0', async () => {
    const child = toy(['--db', 'postgres://app:pw1@db/jobs?password=s3cret&schema=q', '--wait-ms', '5']);
    try {
      const url = await child.listening();
      expect((await fetch(url)).status).toBe(200);
      expect(await child.stop('SIGTERM', 10_000)).toEqual({ code: 0, signal: null });
      expect(child.stdout()).toBe(`leasehold queue listening on ${url}\n`);
      const logs = logLines(child);
      expect(logs.find((l) => l.msg === 'queue ready')).toMatchObject({
        service: 'queue',
        url,
        db: 'postgres://app:***@db/jobs?password=***&schema=q',
        waitMs: 5,
      });
      expect(child.stderr()).not.toContain('s3cret');
      expect(child.stderr()).not.toContain('pw1');
      expect(logs.map((l) => l.msg).slice(-2)).toEqual(['stopping', 'stopped']);
    } finally {
      await child.stop('SIGKILL');
    }
  });

  test("a value the library's check refuses is a usage error naming the flag: one line, exit code 2", async () => {
    const child = toy(['--wait-ms', '60000']);
    expect(await child.exited).toEqual({ code: 2, signal: null });
    expect({ stdout: child.stdout(), stderr: child.stderr() }).toEqual({
      stdout: '',
      stderr: 'leasehold queue: --wait-ms must be below 60000, not 60000\n',
    });
  });

  test('an empty secret is a usage error, and a limit out of range too', async () => {
    const empty = toy(['--secret', '']);
    const limits = toy(['--headers-timeout-ms', '5000', '--request-timeout-ms', '1000']);
    expect([await empty.exited, await limits.exited]).toEqual([
      { code: 2, signal: null },
      { code: 2, signal: null },
    ]);
    expect(empty.stderr()).toBe(
      'leasehold queue: the secret is empty; set a non-empty --secret or LEASEHOLD_SECRET, or unset it\n',
    );
    expect(limits.stderr()).toBe(
      'leasehold queue: --headers-timeout-ms (5000) must not be longer than --request-timeout-ms (1000)\n',
    );
  });

  test('a start that fails is one line saying what to do, exit code 1', async () => {
    const child = toy(['--port', '1']);
    expect(await child.exited).toEqual({ code: 1, signal: null });
    expect(child.stdout()).toBe('');
    expect(child.stderr()).toBe(
      'leasehold queue: port 1 needs privileges this process lacks; pick one from 1024 up with --port, or --port 0 for a free one\n',
    );
  });

  test('a stop that outlasts the force-exit time exits 1 once it is up, not before', async () => {
    const child = toy(['--close-ms', '30000', '--force-ms', '1500']);
    try {
      await child.listening();
      const started = Date.now();
      child.signal('SIGTERM');
      expect(await child.exited).toEqual({ code: 1, signal: null });
      const tookMs = Date.now() - started;
      expect(tookMs).toBeGreaterThanOrEqual(1_400);
      expect(tookMs).toBeLessThan(15_000);
      expect(logLines(child).at(-1)).toMatchObject({ msg: 'did not stop within 1500 ms; exiting' });
    } finally {
      await child.stop('SIGKILL');
    }
  });

  test('a second signal exits 1 at once, without waiting for the stop', async () => {
    const child = toy(['--close-ms', '30000']);
    try {
      await child.listening();
      child.signal('SIGTERM');
      await waitFor(() => logLines(child).some((l) => l.msg === 'stopping'));
      const started = Date.now();
      child.signal('SIGINT');
      expect(await child.exited).toEqual({ code: 1, signal: null });
      expect(Date.now() - started).toBeLessThan(5_000);
      expect(logLines(child).at(-1)).toMatchObject({ msg: 'second signal: exiting without waiting' });
    } finally {
      await child.stop('SIGKILL');
    }
  });

  test('started with an IPC channel, it stops cleanly when its parent dies, even by SIGKILL', async () => {
    // A parent that starts the toy with a channel and shares its stdout and stderr with this test.
    const parent = spawnNode(
      [
        '--input-type=module',
        '-e',
        `import { spawn } from 'node:child_process';
         spawn(process.execPath, [${JSON.stringify(toyScript())}], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
         setInterval(() => {}, 1000);`,
      ],
      { name: 'parent', env: cleanEnv(), cwd: ROOT },
    );
    try {
      const url = await parent.listening();
      parent.signal('SIGKILL');
      // Its stdout closes once the toy, which holds it too, has exited.
      await parent.exited;
      await expect(fetch(url)).rejects.toThrow();
      const logs = logLines(parent);
      expect(logs.map((l) => l.msg).slice(-2)).toEqual(['stopping', 'stopped']);
      expect(logs.find((l) => l.msg === 'stopping')).toMatchObject({ parent: 'gone' });
    } finally {
      await parent.stop('SIGKILL');
    }
  });
});

async function waitFor(condition: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`the condition did not hold within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
