// `leasehold help`, run as the real process from dist/: help on stdout with exit code 0 for the
// program, for a command and for `help` itself; an unknown command is one usage line and exit 2.
import { describe, expect, test } from 'vitest';
import { runCli } from '../helpers/processes.js';

describe('leasehold help (process)', () => {
  test('without a command it prints what `leasehold --help` prints', async () => {
    const help = await runCli(['help']);
    const flag = await runCli(['--help']);
    expect(help).toMatchObject({ code: 0, stderr: '' });
    expect(help.stdout).toMatch(/^Usage: leasehold \[options\] \[command\]/);
    expect(help.stdout).toBe(flag.stdout);
  });

  test("with a command it prints that command's help", async () => {
    const help = await runCli(['help', 'queue']);
    expect(help).toMatchObject({ code: 0, stderr: '' });
    expect(help.stdout).toBe((await runCli(['queue', '--help'])).stdout);
  });

  test('`help --help` prints the usage of help itself', async () => {
    const help = await runCli(['help', '--help']);
    expect(help).toMatchObject({ code: 0, stderr: '' });
    expect(help.stdout).toMatch(/^Usage: leasehold help \[options\] \[command\]/);
  });

  test('an unknown command is one line naming it, and exit code 2', async () => {
    expect(await runCli(['help', 'nosuch'])).toEqual({
      code: 2,
      stdout: '',
      stderr: "leasehold: unknown command 'nosuch'; see leasehold --help\n",
    });
  });
});
