// The real `leasehold receiver` process from dist/: the CLI contract, clean stops on signals,
// and effects and highest tokens that survive kill -9. Run after `npm run build`.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, onTestFinished, test } from 'vitest';
import { tempDir } from '../helpers/tmp.js';
import { closeAfterTest, expectError, postEffect, send, type HttpResult } from './setup.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CLI = join(ROOT, 'dist', 'queue', 'cli.js');

interface Running {
  child: ChildProcess;
  url: string;
  stdout(): string;
  stderr(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Starts `leasehold receiver` and resolves once it printed its URL; killed after the test. */
async function startProcess(args: string[], env: Record<string, string> = {}): Promise<Running> {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run "npm run build" before these tests.`);
  // Only the secret a test passes: never one inherited from the shell running the tests.
  const { LEASEHOLD_SECRET: _inherited, ...inherited } = process.env;
  const child = spawn(process.execPath, [CLI, 'receiver', ...args], {
    cwd: ROOT,
    env: { ...inherited, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  closeAfterTest(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
  });
  onTestFinished(({ task }) => {
    if (task.result?.state === 'fail') console.error(`receiver ${args.join(' ')}\nstdout:\n${stdout}\nstderr:\n${stderr}`);
  });
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no "listening on" line within 20 s; stderr:\n${stderr}`)), 20_000);
    const check = () => {
      const match = /listening on (http:\/\/\S+)/.exec(stdout);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]!);
      }
    };
    child.stdout!.on('data', check);
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`receiver exited (${code ?? signal}) before listening; stderr:\n${stderr}`));
    });
  });
  return { child, url, stdout: () => stdout, stderr: () => stderr, exited };
}

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
    const effects = (await send(second.url, { path: '/effects' })).body.effects as Array<{ jobId: string; qty: number }>;
    const recovered = new Set(effects.map((e) => e.jobId));
    expect(acknowledged.filter((jobId) => !recovered.has(jobId)), 'acknowledged but lost').toEqual([]);
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
    const plain = await startProcess(['--port', '0', '--db', join(dir, 'plain.sqlite')], { LEASEHOLD_SECRET: 'from-env' });
    expectError(await send(plain.url, { method: 'POST', path: '/admin/reset' }), 404, 'not_found');
    expectError(await postEffect(plain.url, { jobId: 'a', qty: 1, token: 1 }), 401, 'invalid_signature');

    const testMode = await startProcess(['--port', '0', '--db', join(dir, 'test.sqlite'), '--test-mode']);
    const queued = await send(testMode.url, { method: 'POST', path: '/admin/faults', body: JSON.stringify({ kind: 'fail', status: 503 }) });
    expect(queued.status).toBe(200);
    expectError(await postEffect(testMode.url, { jobId: 'a', qty: 1, token: 1 }), 503, 'injected_fault');
  });

  test('--help explains every flag', async () => {
    const child = spawn(process.execPath, [CLI, 'receiver', '--help'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stderr.resume();
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    const code = await new Promise((resolve) => child.on('exit', resolve));
    expect(code).toBe(0);
    for (const flag of ['--port', '--db', '--host', '--secret', '--test-mode', '--log-level', 'LEASEHOLD_SECRET']) {
      expect({ flag, present: out.includes(flag) }).toEqual({ flag, present: true });
    }
  });

  test('the package bin points at the CLI these tests run', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { bin: Record<string, string> };
    expect(join(ROOT, pkg.bin.leasehold!)).toBe(CLI);
  });
});
