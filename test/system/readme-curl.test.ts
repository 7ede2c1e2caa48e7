// The README's curl walk-through, run line by line against the three services as processes:
// each line's comment says the status (or the body) it gets, and it must get it.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { ROOT, startProcess } from '../helpers/processes.js';
import { tempDir } from '../helpers/tmp.js';

/** curl with `--json` (7.82 and later), or undefined. */
function curlVersion(): string | undefined {
  try {
    const version = /^curl (\d+)\.(\d+)/.exec(execFileSync('curl', ['--version'], { encoding: 'utf8' }));
    return version && (Number(version[1]) > 7 || (Number(version[1]) === 7 && Number(version[2]) >= 82))
      ? version[0]
      : undefined;
  } catch {
    return undefined;
  }
}

/** The curl lines of the README's "Try it with curl" section, each with what its comment expects. */
function walkThrough(): Array<{ command: string; expected: string }> {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const section = readme.slice(
    readme.indexOf('## Try it with curl'),
    readme.indexOf('\n## ', readme.indexOf('## Try it with curl') + 1),
  );
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)]
    .flatMap(([, block]) => block!.split('\n'))
    .filter((line) => line.startsWith('curl '))
    .map((line) => {
      const [command, expected] = line.split(/\s+#\s+/, 2);
      return { command: command!, expected: expected ?? '' };
    });
}

test.skipIf(curlVersion() === undefined)("the README's curl examples answer as their comments say", async () => {
  const lines = walkThrough();
  expect(lines.some((l) => l.command.includes('$G/send'))).toBe(true);
  expect(lines.some((l) => l.command.includes('$R/effects'))).toBe(true);

  const dir = tempDir('leasehold-readme-');
  const quiet = ['--port', '0', '--log-level', 'warn'];
  const [queue, receiver] = await Promise.all([
    startProcess('queue', [...quiet, '--db', join(dir, 'queue.sqlite')]),
    startProcess('receiver', [...quiet, '--db', join(dir, 'receiver.sqlite')]),
  ]);
  const gateway = await startProcess('gateway', [...quiet, '--queue', queue.url, '--receiver', receiver.url]);
  const env = { ...process.env, Q: queue.url, G: gateway.url, R: receiver.url };
  for (const { command, expected } of lines) {
    const body = join(dir, 'body.json');
    const status = execFileSync('bash', ['-c', `${command} -o ${body} -w '%{http_code}'`], { env, encoding: 'utf8' });
    const answer = { command, status, body: readFileSync(body, 'utf8') };
    if (!/^\d{3}\b/.test(expected)) {
      expect(JSON.parse(answer.body), command).toEqual(JSON.parse(expected));
      continue;
    }
    expect(answer).toMatchObject({ status: expected.slice(0, 3) });
    // "409 stale_lease: you already finished this job": the error's code, and words of its message.
    const refusal = /^\d{3} ([a-z_]+)(?:: (.+))?/.exec(expected);
    if (refusal) {
      const error = (JSON.parse(answer.body) as { error: { code: string; message: string } }).error;
      expect(error.code, command).toBe(refusal[1]);
      if (refusal[2]) expect(error.message, command).toContain(refusal[2]);
    }
  }
});
