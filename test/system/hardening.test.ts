// Hardening with the built CLI: the API key from the queue through the gateway to `leasehold
// worker --api-key`; slow clients cut by a real service while a 25 s long poll, on the default
// limits, is answered; and databases a service cannot start on, each one line and exit code 1.
import { execFileSync } from 'node:child_process';
import { connect } from 'node:net';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { QueueClient } from '../../queue/client.js';
import { ReceiverClient } from '../../receiver/client.js';
import { runCli, startProcess } from '../helpers/processes.js';
import { tempDir } from '../helpers/tmp.js';

const KEY = 'system-key-0123456789abcdef';

describe('the API key, end to end', () => {
  test('queue and gateway require it; the gateway presents it to the queue; leasehold worker --api-key does the job', async () => {
    const dir = tempDir('leasehold-apikey-system-');
    const env = { LEASEHOLD_API_KEY: KEY };
    const queue = await startProcess('queue', ['--port', '0', '--db', join(dir, 'q.sqlite')], env);
    const receiver = await startProcess('receiver', ['--port', '0', '--db', join(dir, 'r.sqlite')]);
    const gateway = await startProcess(
      'gateway',
      ['--port', '0', '--queue', queue.url, '--receiver', receiver.url, '--api-key', KEY],
      {},
    );
    expect((await fetch(`${queue.url}/jobs?status=leased`)).status).toBe(401);
    expect((await fetch(`${gateway.url}/send`, { method: 'POST' })).status).toBe(401);
    expect((await fetch(`${queue.url}/healthz`)).status).toBe(200);

    const client = new QueueClient(queue.url, { apiKey: KEY });
    try {
      await client.enqueue({ id: 'job-1', qty: 4 });
      const worker = await runCli([
        'worker',
        '--queue',
        queue.url,
        '--gateway',
        gateway.url,
        '--name',
        'w1',
        '--api-key',
        KEY,
        '--max-jobs',
        '1',
        '--wait-ms',
        '0',
      ]);
      expect(worker.code, worker.stderr).toBe(0);
      expect(await client.get('job-1')).toMatchObject({ status: 'done', owner: 'w1' });
    } finally {
      client.close();
    }
    const effects = new ReceiverClient(receiver.url);
    try {
      expect(await effects.totals()).toEqual({ effects: 1, qty: 4 });
    } finally {
      effects.close();
    }

    const keyless = await runCli(['worker', '--queue', queue.url, '--gateway', gateway.url, '--max-jobs', '1']);
    expect(keyless.code).toBe(1);
    expect(keyless.stderr).toMatch(/unauthorized|API key/);
  });
});

describe('slow clients against a real service', () => {
  test('headers that take longer than --headers-timeout-ms are cut', async () => {
    const dir = tempDir('leasehold-slow-system-');
    const queue = await startProcess('queue', [
      '--port',
      '0',
      '--db',
      join(dir, 'q.sqlite'),
      '--headers-timeout-ms',
      '500',
      '--request-timeout-ms',
      '1000',
    ]);
    const { port } = new URL(queue.url);
    const socket = connect(Number(port), '127.0.0.1');
    socket.on('error', () => {});
    let answer = '';
    socket.on('data', (chunk: Buffer) => (answer += chunk.toString()));
    const started = Date.now();
    socket.write('POST /claims HTTP/1.1\r\nHost: x\r\n');
    await new Promise((resolve) => socket.on('close', resolve));
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(answer).toMatch(/^HTTP\/1\.1 408/);
  });

  test('on the default limits (30 s per request) a 25 s long poll is answered, not cut', async () => {
    const dir = tempDir('leasehold-longpoll-system-');
    const queue = await startProcess('queue', ['--port', '0', '--db', join(dir, 'q.sqlite')]);
    const client = new QueueClient(queue.url);
    try {
      const started = Date.now();
      const waited = client.claimMany('w1', { max: 1, waitMs: 25_000 });
      setTimeout(() => void client.enqueue({ id: 'late', qty: 1 }), 24_000);
      expect((await waited).map((lease) => lease.id)).toEqual(['late']);
      expect(Date.now() - started).toBeGreaterThanOrEqual(23_500);
    } finally {
      client.close();
    }
  }, 60_000);
});

describe('databases a service cannot start on: one line, exit code 1', () => {
  test.each(['queue', 'receiver'])(
    '%s: a file that is not a database, and a --db under a regular file',
    async (service) => {
      const dir = tempDir('leasehold-badstart-');
      const corrupt = join(dir, 'corrupt.sqlite');
      writeFileSync(corrupt, 'not a database, only text long enough to be read as a header. '.repeat(20));
      writeFileSync(join(dir, 'file'), 'x');
      for (const [db, reason] of [
        [corrupt, /is not a SQLite database, or is damaged/],
        [join(dir, 'file', 'q.sqlite'), /--db names a path under a file, not a folder/],
      ] as const) {
        const run = await runCli([service, '--port', '0', '--db', db]);
        expect(run.code, run.stderr).toBe(1);
        const lines = run.stderr.trim().split('\n');
        expect(lines, run.stderr).toHaveLength(1);
        expect(lines[0]).toMatch(new RegExp(`^leasehold ${service}: `));
        expect(lines[0]).toMatch(reason);
        expect(run.stderr).not.toMatch(/\n\s+at /);
      }
    },
  );

  test.for(['queue', 'receiver'])('%s: a read-only database (chattr +i, where allowed)', async (service, context) => {
    const dir = tempDir('leasehold-rostart-');
    const db = join(dir, 'ro.sqlite');
    const first = await startProcess(service, ['--port', '0', '--db', db]);
    await first.stop();
    try {
      execFileSync('chattr', ['+i', db], { stdio: 'ignore' });
    } catch {
      context.skip('chattr +i is not available here (not permitted, or not this file system)');
    }
    try {
      const run = await runCli([service, '--port', '0', '--db', db]);
      expect(run.code, run.stderr).toBe(1);
      expect(run.stderr.trim().split('\n')).toHaveLength(1);
      expect(run.stderr).toMatch(/the database is read-only/);
    } finally {
      execFileSync('chattr', ['-i', db], { stdio: 'ignore' });
    }
  });
});
