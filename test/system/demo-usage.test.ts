// The demo refuses bad flags before it says or starts anything: one line on stderr, exit 2.
import { expect, test } from 'vitest';
import { runCli } from '../helpers/processes.js';

test('a bad --jobs is refused before the banner, with one line and exit code 2', async () => {
  const refused = await runCli(['demo', '--jobs', '2']);
  expect(refused).toEqual({
    code: 2,
    stdout: '',
    stderr: 'leasehold demo: --jobs must be an integer from 6 to 1000, not 2\n',
  });
});
