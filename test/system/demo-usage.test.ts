// The demo refuses bad flags before it says or starts anything: one line on stderr, exit 2.
import { expect, test } from 'vitest';
import { resolveDemoOptions } from '../../demo/options.js';
import { CLI, runCli } from '../helpers/processes.js';

test('a bad --jobs is refused before the banner, with one line and exit code 2', async () => {
  const refused = await runCli(['demo', '--jobs', '2']);
  expect(refused).toEqual({
    code: 2,
    stdout: '',
    stderr: 'leasehold demo: --jobs must be an integer from 6 to 1000, not 2\n',
  });
});

test('a bad LEASEHOLD_JOBS is named as the variable, the flag the user did not type left out', async () => {
  expect(await runCli(['demo'], { LEASEHOLD_JOBS: '2' })).toEqual({
    code: 2,
    stdout: '',
    stderr: 'leasehold demo: LEASEHOLD_JOBS must be an integer from 6 to 1000, not 2\n',
  });
});

test('the library names its own option: runDemo and resolveDemoOptions say jobs, not --jobs', () => {
  expect(() => resolveDemoOptions({ cliPath: CLI, jobs: 2 })).toThrow(
    new RangeError('jobs must be an integer from 6 to 1000, not 2.'),
  );
});
