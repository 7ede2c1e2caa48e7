// The real `leasehold queue` process from dist/: its one line on stdout, its JSON logs, the
// LEASEHOLD_<FLAG> variables, and the one-line answers to a bad flag (exit 2) and to a port in
// use (exit 1). Run after `npm run build`.
import { existsSync, readdirSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import sqlite3 from 'sqlite3';
import { describe, expect, test } from 'vitest';
import { setTimeout as sleep } from 'node:timers/promises';
import { spawnCli } from '../../platform/spawn.js';
import { QueueClient, QueueError } from '../../queue/index.js';
import { testSchema } from '../helpers/postgres.js';
import { CLI, ROOT, cleanEnv, freePort, portInUse, runCli, startProcess } from '../helpers/processes.js';
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

  // Rule 9 as an operator turns it on. The lease is short and the wait well past it; nobody
  // claims meanwhile, so only the policy decides.
  test('--late-finish if-unclaimed takes a finish after the lease ended; the default refuses it', async () => {
    const finishLate = async (flags: string[]) => {
      const db = join(tempDir('leasehold-queue-late-'), 'queue.sqlite');
      const queue = await startProcess('queue', ['--port', '0', '--db', db, ...flags]);
      try {
        const client = new QueueClient(queue.url);
        await client.enqueue({ id: 'late', qty: 1 });
        const lease = (await client.claim('w1', 100))!;
        await sleep(600);
        const status = await client.finish('late', { owner: 'w1', token: lease.token }).then(
          (job) => job.status,
          (err: unknown) => (err instanceof QueueError ? `${err.code} ${String(err.details.reason)}` : String(err)),
        );
        client.close();
        return status;
      } finally {
        await queue.stop('SIGTERM');
      }
    };
    expect(await finishLate(['--late-finish', 'if-unclaimed']), 'with --late-finish if-unclaimed').toBe('done');
    expect(await finishLate([]), 'by default').toBe('stale_lease lease_expired');
  });

  test("the ready line gives SQLite's journal for a SQLite file, and no journal for a postgres:// database (receiver too)", async () => {
    const readyLine = async (service: 'queue' | 'receiver', db: string) => {
      const running = await startProcess(service, ['--port', '0', '--db', db]);
      expect(await running.stop('SIGTERM')).toEqual({ code: 0, signal: null });
      const logs = running
        .stderr()
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as Record<string, unknown>);
      return logs.find((l) => l.msg === `${service} ready`)!;
    };
    const dir = tempDir('leasehold-queue-ready-');
    const sqlite = await readyLine('queue', join(dir, 'queue.sqlite'));
    expect(sqlite).toMatchObject({ journal: 'delete', lateFinish: 'reject' });

    const { url } = testSchema('lh_ready');
    const postgres = await readyLine('queue', url);
    expect({ db: postgres.db, lateFinish: postgres.lateFinish, journal: postgres.journal }).toEqual({
      db: expect.stringMatching(/^postgres:\/\//),
      lateFinish: 'reject',
      journal: undefined,
    });
    expect(Object.keys(postgres)).not.toContain('journal');
    for (const db of [join(dir, 'receiver.sqlite'), url]) {
      expect(Object.keys(await readyLine('receiver', db)), `receiver ready on ${db}`).not.toContain('journal');
    }
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

  test('a --db whose folder cannot be made fails the start with one line, under /proc too (where it used to hang)', async () => {
    for (const [db, folder, cause] of [
      [
        '/proc/leasehold-none/q.sqlite',
        '/proc/leasehold-none',
        "ENOENT: no such file or directory, mkdir '/proc/leasehold-none'",
      ],
      [
        '/sys/leasehold-none/q.sqlite',
        '/sys/leasehold-none',
        "EPERM: operation not permitted, mkdir '/sys/leasehold-none'",
      ],
    ]) {
      for (const service of ['queue', 'receiver']) {
        const { code, stdout, stderr } = await runCli([service, '--port', '0', '--db', db!]);
        expect({ code, stdout, stderr }, `${service} --db ${db}`).toEqual({
          code: 1,
          stdout: '',
          stderr: `leasehold ${service}: cannot make the folder ${folder} for the database (${cause}); pick a --db in a folder this process may write to\n`,
        });
      }
    }
  });

  test('a bad LEASEHOLD_DB or DATABASE_URL is named as the variable it came from', async () => {
    const bad = 'postgres://127.0.0.1:5432/test?schema=a-b';
    const line = `"${bad}" gives the schema name "a-b", which is not a plain identifier; use letters, digits and underscores (at most 63, not starting with a digit)`;
    for (const variable of ['LEASEHOLD_DB', 'DATABASE_URL']) {
      const { code, stdout, stderr } = await runCli(['queue', '--port', '0'], { [variable]: bad });
      expect({ code, stdout, stderr }).toEqual({
        code: 2,
        stdout: '',
        stderr: `leasehold queue: ${variable} ${line}\n`,
      });
    }
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
    [
      ['--db', 'postgres://app:p@ss@127.0.0.1:99999/test'],
      '--db "postgres://***@127.0.0.1:99999/test" is not a URL that can be read: write it as postgres://USER:PASSWORD@HOST:PORT/DATABASE, with a port up to 65535 and any of @ : / ? # % or a space in the user or password percent-encoded (@ as %40)',
    ],
    [
      ['--db', 'postgres://127.0.0.1:5432/test?schema=a&schema=b'],
      '--db "postgres://127.0.0.1:5432/test?schema=a&schema=b" gives ?schema= 2 times ("a", "b"); give it once',
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

  test('SIGTERM while it is still starting: it waits for the start, closes, says so and exits 0', async () => {
    const db = join(tempDir('leasehold-queue-starting-'), 'queue.sqlite');
    // A lock held on the file keeps the queue starting (its first statement waits on it).
    const holder = new sqlite3.Database(db);
    const exec = (sql: string) =>
      new Promise<void>((resolve, reject) => holder.exec(sql, (err) => (err ? reject(err) : resolve())));
    await exec('BEGIN EXCLUSIVE');
    const child = spawnCli(CLI, 'queue', ['--port', '0', '--db', db], { cwd: ROOT, env: cleanEnv() });
    try {
      // It has the file open: its start has begun, and its signal handlers are in place.
      const opened = () =>
        readdirSync(`/proc/${child.pid}/fd`).some((fd) => {
          try {
            return readlinkSync(`/proc/${child.pid}/fd/${fd}`) === db;
          } catch {
            return false;
          }
        });
      await expect.poll(opened, { timeout: 20_000, interval: 20 }).toBe(true);
      child.signal('SIGTERM');
      await exec('COMMIT');
      const exit = await child.exited;
      const messages = child
        .stderr()
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => (JSON.parse(line) as { msg: string }).msg);
      expect({ exit, stdout: child.stdout(), messages }).toEqual({
        exit: { code: 0, signal: null },
        stdout: '',
        messages: ['stopping', 'stopped'],
      });
    } finally {
      await child.stop('SIGKILL');
      await new Promise((resolve) => holder.close(resolve));
    }
  });
});
