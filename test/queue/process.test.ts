// The real `leasehold queue` process from dist/: its one line on stdout, its JSON logs, the
// LEASEHOLD_<FLAG> variables, and the one-line answers to a bad flag (exit 2) and to a port in
// use (exit 1). Run after `npm run build`.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { freePort, portInUse, runCli, startProcess } from '../helpers/processes.js';
import { tempDir } from '../helpers/tmp.js';

describe('leasehold queue (process)', () => {
  test('prints one listening line, logs JSON lines naming the service, stops cleanly on SIGTERM', async () => {
    const db = join(tempDir('leasehold-queue-cli-'), 'queue.sqlite');
    const queue = await startProcess('queue', ['--port', '0', '--db', db]);
    expect(queue.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect((await fetch(`${queue.url}/healthz`)).status).toBe(200);
    expect(await queue.stop('SIGTERM')).toEqual({ code: 0, signal: null });
    expect(queue.stdout()).toBe(`leasehold queue listening on ${queue.url}\n`);
    const logs = queue
      .stderr()
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(logs.find((l) => l.msg === 'queue ready')).toMatchObject({
      service: 'queue',
      pid: queue.child.pid,
      url: queue.url,
    });
  });

  test('reads LEASEHOLD_PORT and LEASEHOLD_DB; --port beats LEASEHOLD_PORT', async () => {
    const dir = tempDir('leasehold-queue-env-');
    const port = await freePort();
    const fromEnv = await startProcess('queue', [], {
      LEASEHOLD_PORT: String(port),
      LEASEHOLD_DB: join(dir, 'env.sqlite'),
      LEASEHOLD_LOG_LEVEL: 'warn',
    });
    expect(fromEnv.url).toBe(`http://127.0.0.1:${port}`);
    expect(existsSync(join(dir, 'env.sqlite'))).toBe(true);
    expect(fromEnv.stderr()).toBe('');

    // The variable names a port in use: were it read, the queue could not start.
    const busy = await portInUse();
    const flag = await startProcess('queue', ['--port', '0', '--db', join(dir, 'flag.sqlite')], {
      LEASEHOLD_PORT: String(busy),
    });
    expect(new URL(flag.url).port).not.toBe(String(busy));
  });

  test('--port abc: one line that says what is wrong, exit code 2', async () => {
    const { code, stdout, stderr } = await runCli(['queue', '--port', 'abc']);
    expect({ code, stdout, stderr }).toEqual({
      code: 2,
      stdout: '',
      stderr: 'leasehold queue: --port must be an integer from 0 to 65535 (0 picks a free port), not "abc"\n',
    });
  });

  test.each([
    [['--db', ''], '--db is empty; give a SQLite file path, :memory: or a postgres:// URL'],
    [
      ['--db', 'postgres://postgres@127.0.0.1:5432/test', '--journal', 'wal'],
      '--journal wal is for SQLite; a postgres:// database keeps its own write-ahead log, so leave --journal out',
    ],
  ])('%j: one line that says what is wrong, exit code 2, nothing started', async (args, line) => {
    for (const service of ['queue', 'receiver']) {
      const { code, stdout, stderr } = await runCli([service, '--port', '0', ...args]);
      expect({ code, stdout, stderr }).toEqual({ code: 2, stdout: '', stderr: `leasehold ${service}: ${line}\n` });
    }
  });

  test('a port in use: one line that says what to do, exit code 1', async () => {
    const port = await portInUse();
    const db = join(tempDir('leasehold-queue-busy-'), 'queue.sqlite');
    const { code, stdout, stderr } = await runCli(['queue', '--port', String(port), '--db', db]);
    expect({ code, stdout, stderr }).toEqual({
      code: 1,
      stdout: '',
      stderr: `leasehold queue: port ${port} is in use; pick another with --port, or --port 0 for a free one\n`,
    });
  });

  test('--help names each flag with its variable', async () => {
    const { code, stdout } = await runCli(['queue', '--help']);
    expect(code).toBe(0);
    for (const name of [
      '--port',
      'LEASEHOLD_PORT',
      '--db',
      'LEASEHOLD_DB',
      'DATABASE_URL',
      '--late-finish',
      'LEASEHOLD_LATE_FINISH',
      '--log-level',
      'LEASEHOLD_LOG_LEVEL',
    ]) {
      expect(stdout, name).toContain(name);
    }
  });
});
