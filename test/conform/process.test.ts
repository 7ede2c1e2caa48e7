// `leasehold conform <url>` as a user runs it: one line per case, `N passed, M failed` last,
// exit 0 when all passed and 1 on a failure; LEASEHOLD_SECRET for --secret; bad flags exit 2.
// Run after `npm run build`.
import { describe, expect, onTestFinished, test } from 'vitest';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { spawnCli, spawnNode } from '../../platform/spawn.js';
import { CLI, cleanEnv, ROOT, runCli } from '../helpers/processes.js';
import { tempDir } from '../helpers/tmp.js';
import { toyDownstream } from '../helpers/toy-downstream.js';

const CASES = 15;

describe('leasehold conform (process)', () => {
  test('a downstream that keeps the protocol, its secret from LEASEHOLD_SECRET: every case ok, exit 0', async () => {
    const downstream = await toyDownstream({ secret: 'from-env' });
    const { code, stdout, stderr } = await runCli(['conform', downstream.url], { LEASEHOLD_SECRET: 'from-env' });
    const lines = stdout.trim().split('\n');
    expect({ code, stderr, last: lines.at(-1) }, stdout).toEqual({
      code: 0,
      stderr: '',
      last: `${CASES} passed, 0 failed`,
    });
    // The toy offers no batches: the batch extension's case is skipped, last.
    expect(lines.slice(0, -1)).toHaveLength(CASES + 1);
    expect(lines.slice(0, -2).every((line) => line.startsWith('ok    '))).toBe(true);
    expect(lines.at(-2)).toMatch(/^skip {2}a batch, when offered, .*\(the downstream offers no batches/);
  });

  test('a downstream that applies twice under a race: its case FAILs by name with what came, exit 1', async () => {
    const downstream = await toyDownstream({ breaks: 'race' });
    const { code, stdout } = await runCli(['conform', downstream.url]);
    const lines = stdout.trim().split('\n');
    expect({ code, last: lines.at(-1) }, stdout).toEqual({ code: 1, last: `${CASES - 5} passed, 1 failed` });
    const failures = lines.filter((line) => line.startsWith('FAIL'));
    expect(failures).toEqual([
      expect.stringMatching(
        /^FAIL {2}racing identical requests give exactly one applied: 16 racing requests: expected 1 × 201 applied and 15 × 200 duplicate, got \d+ × 201 applied/,
      ),
    ]);
    const applied = Number(/got (\d+) × 201 applied/.exec(failures[0] ?? '')?.[1]);
    expect(applied, failures[0]).toBeGreaterThan(1);
    expect(lines.filter((line) => line.startsWith('skip'))).toHaveLength(5);
  });

  test('a downstream that never answers: its first case FAILs as timed out, the rest are not run, exit 1 after one timeout', async () => {
    const server = http.createServer((req) => req.resume());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    onTestFinished(() => {
      server.closeAllConnections();
      server.close();
    });
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/effects`;
    const started = performance.now();
    const { code, stdout } = await runCli(['conform', url, '--timeout-ms', '1000']);
    const elapsedMs = performance.now() - started;
    const lines = stdout.trim().split('\n');
    const notRun = 'not run: the downstream did not answer a request within 1000 ms';
    expect({ code, first: lines[0], last: lines.at(-1), elapsedUnder10s: elapsedMs < 10_000 }, stdout).toEqual({
      code: 1,
      first: `FAIL  applied, then duplicate with nothing added: first request: expected 201 applied, got no answer from ${url} within 1000 ms`,
      last: '0 passed, 1 failed, 11 not run',
      elapsedUnder10s: true,
    });
    // Without a secret the signature cases are skipped as always; every other case is not run.
    expect(
      lines.slice(1, -1).map((line) => line.replace(/^skip {2}.*? \((no secret given|not run: .*)\)$/, '$1')),
    ).toEqual([...Array<string>(10).fill(notRun), ...Array<string>(4).fill('no secret given'), notRun]);
  });

  test('the downstream written by hand (docs/examples/downstream.mjs, no leasehold code) passes every case, signed', async () => {
    const env = {
      ...cleanEnv(),
      DB: join(tempDir('leasehold-conform-'), 'downstream.sqlite'),
      PORT: '0',
      LEASEHOLD_SECRET: 'hand-written',
    };
    const child = spawnNode([join(ROOT, 'docs', 'examples', 'downstream.mjs')], { name: 'downstream.mjs', env });
    onTestFinished(async ({ task }) => {
      if (task.result?.state === 'fail') console.error(`downstream.mjs stderr:\n${child.stderr()}`);
      await child.stop('SIGKILL');
    });
    const url = await child.listening(20_000);
    const { code, stdout } = await runCli(['conform', `${url}/effects`, '--secret', 'hand-written']);
    expect({ code, last: stdout.trim().split('\n').at(-1) }, stdout).toEqual({
      code: 0,
      last: `${CASES} passed, 0 failed`,
    });
  });

  test('stdout closed by its reader (conform URL | head -1): exit 1 without a stack trace', async () => {
    const downstream = await toyDownstream();
    const child = spawnCli(CLI, 'conform', [downstream.url], { env: cleanEnv() });
    onTestFinished(async () => {
      await child.stop('SIGKILL');
    });
    await new Promise((resolve) => child.process.stdout!.once('data', resolve));
    child.process.stdout!.destroy();
    const exit = await child.exited;
    expect({ exit, stderr: child.stderr() }).toEqual({ exit: { code: 1, signal: null }, stderr: '' });
  });

  test('--help names the argument, the flags and the exit codes', async () => {
    const { code, stdout } = await runCli(['conform', '--help']);
    expect(code).toBe(0);
    for (const phrase of [
      '<url>',
      '--secret',
      '--races',
      '--timeout-ms',
      'N passed, M failed',
      'K not run',
      'Exit code 0',
    ]) {
      expect(stdout, phrase).toContain(phrase);
    }
  });

  test.each([
    [['ftp://x/effects'], '<url> must be an http:// URL'],
    [[], "missing required argument 'url'"],
    [['http://127.0.0.1:1/e', '--races', '1'], '--races must be an integer of at least 2'],
    [['http://127.0.0.1:1/e', '--races', '65'], '--races must be at most 64'],
    [['http://127.0.0.1:1/e', '--secret', ''], 'the secret is empty'],
  ])('bad usage %j: one line, exit 2', async (args, phrase) => {
    const { code, stdout, stderr } = await runCli(['conform', ...args]);
    expect({ code, stdout }).toEqual({ code: 2, stdout: '' });
    expect(stderr).toMatch(/^leasehold conform: [^\n]+\n$/);
    expect(stderr).toContain(phrase);
  });
});
