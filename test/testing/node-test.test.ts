// The kit under node:test, as a child process on the built package (`leasehold/testing` resolves
// to dist/ by the package's own name): its assertions pass and fail there as under vitest, and a
// failure is reported with the ExpectationError's message as it is, job by job.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { ROOT } from '../helpers/processes.js';

const FIXTURES = join(ROOT, 'test', 'testing', 'fixtures');

function nodeTest(file: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--test', '--test-reporter=tap', join(FIXTURES, file)],
      { cwd: ROOT, timeout: 60_000 },
      (err, stdout, stderr) => resolve({ code: err ? Number(err.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

test('under node:test the zombie passes and each broken run is rejected with its ExpectationError', async () => {
  const run = await nodeTest('expectations.node-test.mjs');
  expect(run, run.stdout + run.stderr).toMatchObject({ code: 0 });
  expect(run.stdout).toMatch(/^# pass 3$/m);
  expect(run.stdout).toMatch(/^# fail 0$/m);
});

test('node:test reports a failed expectation with its message, job by job', async () => {
  const run = await nodeTest('failing.node-test.mjs');
  expect(run.code, run.stdout + run.stderr).toBe(1);
  expect(run.stdout).toMatch(/^# fail 1$/m);
  expect(run.stdout).toContain(
    [
      '    expected every done job to take effect exactly once at "receiver", but the audit found 1 violation about 1 job:',
      '      job "order-1" (missing_effect): expected 1 effect with qty 3 (the job is done, token 1); actual: no effect',
      '    (audited 1 job, 1 done, against 0 effects at "receiver")',
    ].join('\n'),
  );
  expect(run.stdout).toContain("name: 'ExpectationError'");
});
