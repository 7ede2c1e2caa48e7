// The real `leasehold receiver` process from dist/: the CLI contract, clean stops on signals,
// and effects and highest tokens that survive kill -9. Run after `npm run build`.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { CLI, ROOT, freePort, portInUse, runCli, startProcess as startService } from '../helpers/processes.js';
import { tempDir } from '../helpers/tmp.js';
import { expectError, postEffect, send, type HttpResult } from './setup.js';

/** Starts `leasehold receiver` and resolves once it printed its URL; killed after the test. */
const startProcess = (args: string[], env: Record<string, string> = {}) => startService('receiver', args, env);

/** Settles every request, keeping the answer or the connection error. */
const settle = (promise: Promise<HttpResult>) =>
  promise.then(
    (res) => ({ res }),
    (err: Error) => ({ err }),
  );

describe('leasehold receiver (process)', () => {
  test('effects and highest tokens survive kill -9; acknowledged effects are never lost', async () => {
    const dir = tempDir('leasehold-receiver-kill-');
    const db = join(dir, 'data', 'receiver.sqlite');
    const first = await startProcess(['--port', '0', '--db', db, '--log-level', 'warn']);

    for (let i = 0; i < 10; i += 1) {
      const res = await postEffect(first.url, { jobId: `j${i}`, qty: i + 1, token: 2 });
      expect({ job: i, status: res.status }).toEqual({ job: i, status: 201 });
    }
    expect((await postEffect(first.url, { jobId: 'j0', qty: 1, token: 5 })).status).toBe(200);

    // A burst still in flight when the process dies: every 201 it gave must be on disk.
    let answered = 0;
    let halfAnswered!: () => void;
    const half = new Promise<void>((resolve) => (halfAnswered = resolve));
    const burst = Array.from({ length: 60 }, (_, i) =>
      settle(postEffect(first.url, { jobId: `burst-${i}`, qty: 1, token: 1 })).then((s) => {
        if (++answered === 20) halfAnswered();
        return s;
      }),
    );
    await half;
    first.child.kill('SIGKILL');
    expect(await first.exited).toEqual({ code: null, signal: 'SIGKILL' });
    const settled = await Promise.all(burst);
    const acknowledged = settled.flatMap((s, i) => ('res' in s && s.res.status === 201 ? [`burst-${i}`] : []));
    expect(acknowledged.length).toBeGreaterThanOrEqual(20);

    const second = await startProcess(['--port', '0', '--db', db, '--log-level', 'warn']);
    const effects = (await send(second.url, { path: '/effects' })).body.effects as Array<{
      jobId: string;
      qty: number;
    }>;
    const recovered = new Set(effects.map((e) => e.jobId));
    expect(
      acknowledged.filter((jobId) => !recovered.has(jobId)),
      'acknowledged but lost',
    ).toEqual([]);
    const steady = effects.filter((e) => !e.jobId.startsWith('burst-'));
    expect(steady.length).toBe(10);
    expect(steady.reduce((sum, e) => sum + e.qty, 0)).toBe(55);
    const totals = (await send(second.url, { path: '/totals' })).body;
    expect(totals).toEqual({ effects: effects.length, qty: effects.reduce((sum, e) => sum + e.qty, 0) });

    const resend = await postEffect(second.url, { jobId: 'j3', qty: 4, token: 2 });
    expect({ status: resend.status, outcome: resend.body.outcome }).toEqual({ status: 200, outcome: 'duplicate' });
    const stale = await postEffect(second.url, { jobId: 'j0', qty: 1, token: 4 });
    expectError(stale, 409, 'fenced');
    expect(stale.body.error.highestToken).toBe(5);
    expect((await send(second.url, { path: '/totals' })).body).toEqual(totals);
  });

  test('prints one listening line on stdout, logs JSON on stderr, stops cleanly on SIGTERM and SIGINT', async () => {
    const dir = tempDir('leasehold-receiver-cli-');
    for (const signal of ['SIGTERM', 'SIGINT'] as const) {
      const running = await startProcess(['--port', '0', '--db', join(dir, `${signal}.sqlite`)]);
      expect(running.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect((await send(running.url, { path: '/healthz' })).status).toBe(200);
      expect((await postEffect(running.url, { jobId: 'a', qty: 1, token: 1 })).status).toBe(201);
      running.child.kill(signal);
      expect({ signal, exit: await running.exited }).toEqual({ signal, exit: { code: 0, signal: null } });
      expect(running.stdout()).toBe(`leasehold receiver listening on ${running.url}\n`);
      const lines = running.stderr().trim().split('\n');
      const notJson = lines.filter((line) => {
        try {
          JSON.parse(line);
          return false;
        } catch {
          return true;
        }
      });
      expect(notJson).toEqual([]);
    }
  });

  test('--test-mode enables the admin routes; LEASEHOLD_SECRET requires signatures', async () => {
    const dir = tempDir('leasehold-receiver-flags-');
    const plain = await startProcess(['--port', '0', '--db', join(dir, 'plain.sqlite')], {
      LEASEHOLD_SECRET: 'from-env',
    });
    expectError(await send(plain.url, { method: 'POST', path: '/admin/reset' }), 404, 'not_found');
    expectError(await postEffect(plain.url, { jobId: 'a', qty: 1, token: 1 }), 401, 'invalid_signature');

    const testMode = await startProcess(['--port', '0', '--db', join(dir, 'test.sqlite'), '--test-mode']);
    const queued = await send(testMode.url, {
      method: 'POST',
      path: '/admin/faults',
      body: JSON.stringify({ kind: 'fail', status: 503 }),
    });
    expect(queued.status).toBe(200);
    expectError(await postEffect(testMode.url, { jobId: 'a', qty: 1, token: 1 }), 503, 'injected_fault');
  });

  test('reads LEASEHOLD_PORT, LEASEHOLD_DB and LEASEHOLD_TEST_MODE; --port beats LEASEHOLD_PORT', async () => {
    const dir = tempDir('leasehold-receiver-env-');
    const port = await freePort();
    const fromEnv = await startProcess([], {
      LEASEHOLD_PORT: String(port),
      LEASEHOLD_DB: join(dir, 'env.sqlite'),
      LEASEHOLD_TEST_MODE: 'true',
    });
    expect(fromEnv.url).toBe(`http://127.0.0.1:${port}`);
    expect((await send(fromEnv.url, { method: 'POST', path: '/admin/reset', body: '{}' })).status).toBe(200);
    expect(existsSync(join(dir, 'env.sqlite'))).toBe(true);

    const busy = await portInUse();
    const flag = await startProcess(['--port', '0', '--db', join(dir, 'flag.sqlite')], {
      LEASEHOLD_PORT: String(busy),
      LEASEHOLD_TEST_MODE: '0',
    });
    expect(new URL(flag.url).port).not.toBe(String(busy));
    expectError(await send(flag.url, { method: 'POST', path: '/admin/reset' }), 404, 'not_found');
  });

  test('a bad flag exits 2, a port in use exits 1, each with one line', async () => {
    expect(await runCli(['receiver', '--port', '1e3'])).toEqual({
      code: 2,
      stdout: '',
      stderr: 'leasehold receiver: --port must be an integer from 0 to 65535 (0 picks a free port), not "1e3"\n',
    });
    const busy = await portInUse();
    expect(await runCli(['receiver', '--port', String(busy), '--db', ':memory:'])).toEqual({
      code: 1,
      stdout: '',
      stderr: `leasehold receiver: port ${busy} is in use; pick another with --port, or --port 0 for a free one\n`,
    });
  });

  test('--retain-journal prunes old journal entries and keeps effects; a bad duration exits 2', async () => {
    const dir = tempDir('leasehold-receiver-retain-');
    const running = await startProcess(['--port', '0', '--db', join(dir, 'r.sqlite'), '--log-level', 'warn'], {
      LEASEHOLD_RETAIN_JOURNAL: '1s',
    });
    expect((await postEffect(running.url, { jobId: 'a', qty: 2, token: 3 })).status).toBe(201);
    const deadline = Date.now() + 15_000;
    let journal: unknown[] = [{}];
    while (journal.length > 0 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      journal = (await send(running.url, { path: '/journal' })).body.journal as unknown[];
    }
    expect(journal, 'the journal after the 1 s retention ran out').toEqual([]);
    expect((await send(running.url, { path: '/totals' })).body).toEqual({ effects: 1, qty: 2 });
    expectError(await postEffect(running.url, { jobId: 'a', qty: 2, token: 2 }), 409, 'fenced');

    expect(await runCli(['receiver', '--retain-journal', '0'])).toEqual({
      code: 2,
      stdout: '',
      stderr:
        'leasehold receiver: --retain-journal must be a positive duration such as 7d, 12h, 30m, 90s or 5000 ' +
        '(milliseconds), not "0"\n',
    });
  });

  test('--help explains every flag', async () => {
    const { code, stdout: out } = await runCli(['receiver', '--help']);
    expect(code).toBe(0);
    for (const flag of [
      '--port',
      '--db',
      '--host',
      '--secret',
      '--test-mode',
      '--log-level',
      '--retain-journal',
      'LEASEHOLD_SECRET',
      'LEASEHOLD_PORT',
      'LEASEHOLD_TEST_MODE',
    ]) {
      expect({ flag, present: out.includes(flag) }).toEqual({ flag, present: true });
    }
  });

  test('the package bin points at the CLI these tests run', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { bin: Record<string, string> };
    expect(join(ROOT, pkg.bin.leasehold!)).toBe(CLI);
  });
});
