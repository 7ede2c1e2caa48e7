// The command line's floor: the parsers, the LEASEHOLD_<FLAG> variables, the one-line usage
// errors and start-up failures. The commands are built and parsed in this process; process.exit
// and stderr are caught.
import { InvalidArgumentError, Option, type Command } from 'commander';
import { afterEach, describe, expect, test, vi } from 'vitest';
import { demoCommand, startCommand } from '../../demo/main.js';
import { gatewayCommand } from '../../gateway/main.js';
import {
  envVariable,
  flagNamesOf,
  integerAtLeast,
  leaseholdCommand,
  oneOf,
  parseDuration,
  parsePort,
  parsePositiveInt,
  parseWholeNumber,
  startFailure,
  withFlagNames,
  usageLine,
} from '../../platform/flags.js';
import { queueCommand } from '../../queue/main.js';
import { receiverCommand } from '../../receiver/main.js';
import { workerCommand } from '../../worker/main.js';

/** The message a parser refuses `value` with, or undefined when it accepts it. */
function refusal(parse: (value: string) => unknown, value: string): string | undefined {
  try {
    parse(value);
    return undefined;
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidArgumentError);
    return (err as Error).message;
  }
}

describe('parsers', () => {
  test('parsePort takes digits from 0 to 65535 and nothing else', () => {
    expect(['0', '4100', '65535', '080'].map(parsePort)).toEqual([0, 4100, 65535, 80]);
    for (const bad of ['', 'abc', '1e3', '-1', '4100.0', ' 4100', '65536', '0x10', '99999999999999999999']) {
      expect({ bad, message: refusal(parsePort, bad) }).toEqual({
        bad,
        message: `must be an integer from 0 to 65535 (0 picks a free port), not ${JSON.stringify(bad)}`,
      });
    }
  });

  test('whole numbers: digits only, from the minimum up, safe integers', () => {
    expect(parsePositiveInt('3')).toBe(3);
    expect(parseWholeNumber('0')).toBe(0);
    expect(integerAtLeast(300)('300')).toBe(300);
    expect(refusal(parsePositiveInt, '0')).toBe('must be a positive integer, not "0"');
    expect(refusal(parseWholeNumber, '-1')).toBe('must be a whole number, not "-1"');
    expect(refusal(integerAtLeast(300), '299')).toBe('must be an integer of at least 300, not "299"');
    for (const bad of ['', '1.5', '1e3', '9007199254740993'])
      expect(refusal(parsePositiveInt, bad)).toMatch(/^must be a positive integer/);
  });

  test('oneOf names the choices', () => {
    const policy = oneOf(['reject', 'if-unclaimed'] as const);
    expect(policy('if-unclaimed')).toBe('if-unclaimed');
    expect(refusal(policy, 'Reject')).toBe('must be one of reject, if-unclaimed, not "Reject"');
  });

  test('parseDuration takes digits with ms, s, m, h or d, or digits alone as milliseconds', () => {
    expect(['7d', '12h', '30m', '90s', '250ms', '5000', '1'].map(parseDuration)).toEqual([
      604_800_000, 43_200_000, 1_800_000, 90_000, 250, 5_000, 1,
    ]);
    const signsAndSpaces = ['', '0', '0s', '-1h', ' 7d', '7 d'];
    const otherShapes = ['1.5h', '7D', '1h30m', '7w', 'd', '2e9d', '9007199254740992'];
    for (const bad of [...signsAndSpaces, ...otherShapes]) {
      expect({ bad, message: refusal(parseDuration, bad) }).toEqual({
        bad,
        message: `must be a positive duration such as 7d, 12h, 30m, 90s or 5000 (milliseconds), not ${JSON.stringify(bad)}`,
      });
    }
    const tooLong = refusal(parseDuration, '104249991375d');
    expect(tooLong, 'past 2^53 - 1 milliseconds').toMatch(/^must be a positive duration/);
  });
});

describe('usage errors', () => {
  test("a refused value names the flag, or the variable it came from, then the parser's message", () => {
    const invalid = (message: string) => ({ code: 'commander.invalidArgument', message });
    expect(
      usageLine(
        invalid(`error: option '--port <port>' argument 'abc' is invalid. must be an integer, not "abc"`),
        'leasehold queue',
      ),
    ).toBe('--port must be an integer, not "abc"');
    expect(
      usageLine(
        invalid(
          `error: option '--port <port>' value 'abc' from env 'LEASEHOLD_PORT' is invalid. must be an integer, not "abc"`,
        ),
        'leasehold queue',
      ),
    ).toBe('LEASEHOLD_PORT must be an integer, not "abc"');
  });

  test('a command line of the wrong shape points to --help, on one line', () => {
    const line = usageLine(
      { code: 'commander.unknownOption', message: "error: unknown option '--prot'\n(Did you mean --port?)" },
      'leasehold queue',
    );
    expect(line).toBe("unknown option '--prot' (Did you mean --port?); see leasehold queue --help");
  });

  describe('through a command', () => {
    afterEach(() => {
      vi.restoreAllMocks();
      vi.unstubAllEnvs();
    });

    /** Parses `args` with `command`; what it printed on stderr and the code it exited with, if it did. */
    async function parse(
      command: Command,
      args: string[],
    ): Promise<{ exit: number | undefined; stderr: string; opts: Record<string, unknown> }> {
      let stderr = '';
      vi.spyOn(process.stderr, 'write').mockImplementation((chunk) => ((stderr += String(chunk)), true));
      vi.spyOn(process, 'exit').mockImplementation((code) => {
        throw Object.assign(new Error('exit'), { exitCode: code });
      });
      let opts: Record<string, unknown> = {};
      command.action((flags: Record<string, unknown>) => void (opts = flags));
      try {
        await command.parseAsync(args, { from: 'user' });
        return { exit: undefined, stderr, opts };
      } catch (err) {
        return { exit: (err as { exitCode?: number }).exitCode, stderr, opts };
      }
    }

    const probe = () =>
      leaseholdCommand('probe')
        .addOption(new Option('--port <port>').argParser(parsePort).default(4100))
        .option('--keep', 'a boolean flag', false);

    test('a bad value is one line on stderr and exit code 2', async () => {
      expect(await parse(probe(), ['--port', 'abc'])).toMatchObject({
        exit: 2,
        stderr: 'leasehold probe: --port must be an integer from 0 to 65535 (0 picks a free port), not "abc"\n',
      });
      expect(await parse(probe(), ['--nope'])).toMatchObject({
        exit: 2,
        stderr: "leasehold probe: unknown option '--nope'; see leasehold probe --help\n",
      });
    });

    test('each flag is read from its LEASEHOLD_ variable, and the flag beats it', async () => {
      vi.stubEnv('LEASEHOLD_PORT', '4321');
      expect((await parse(probe(), [])).opts).toMatchObject({ port: 4321 });
      expect((await parse(probe(), ['--port', '0'])).opts).toMatchObject({ port: 0 });
      vi.stubEnv('LEASEHOLD_PORT', 'x');
      expect((await parse(probe(), [])).stderr).toBe(
        'leasehold probe: LEASEHOLD_PORT must be an integer from 0 to 65535 (0 picks a free port), not "x"\n',
      );
      // A bad variable does not matter when the flag is given: it is never read.
      expect(await parse(probe(), ['--port', '5'])).toMatchObject({ exit: undefined, opts: { port: 5 } });
    });

    // A range the library checks after parsing (checkOptions): its message names where the value came from.
    test("a library option's name is its flag's, or its variable's when the value came from there", async () => {
      const probed = () =>
        leaseholdCommand('probe')
          .addOption(new Option('--wait-ms <ms>').argParser(parsePort))
          .addOption(new Option('--queue <url>'));
      const namesAfter = async (args: string[]) => {
        const command = probed();
        await parse(command, args);
        return flagNamesOf(command, { queueUrl: '--queue' });
      };
      expect(await namesAfter(['--wait-ms', '5', '--queue', 'http://x'])).toMatchObject({
        waitMs: '--wait-ms',
        queue: '--queue',
        queueUrl: '--queue',
      });
      vi.stubEnv('LEASEHOLD_WAIT_MS', '5');
      vi.stubEnv('LEASEHOLD_QUEUE', 'http://x');
      expect(await namesAfter([])).toMatchObject({
        waitMs: 'LEASEHOLD_WAIT_MS',
        queue: 'LEASEHOLD_QUEUE',
        queueUrl: 'LEASEHOLD_QUEUE',
      });
      // The flag beats the variable, and names the value.
      expect(await namesAfter(['--wait-ms', '7'])).toMatchObject({ waitMs: '--wait-ms', queueUrl: 'LEASEHOLD_QUEUE' });
    });

    test('a boolean variable is on for true or 1, off for false, 0 or empty, and refused otherwise', async () => {
      for (const [value, keep] of [
        ['true', true],
        ['1', true],
        ['false', false],
        ['0', false],
        ['', false],
      ] as const) {
        vi.stubEnv('LEASEHOLD_KEEP', value);
        expect({ value, opts: (await parse(probe(), [])).opts }).toMatchObject({ value, opts: { keep } });
      }
      vi.stubEnv('LEASEHOLD_KEEP', 'yes please');
      expect(await parse(probe(), [])).toMatchObject({
        exit: 2,
        stderr: 'leasehold probe: LEASEHOLD_KEEP must be true or false (or 1 or 0), not "yes please"\n',
      });
    });

    test('leasehold receiver --retain-journal takes a duration, from the flag or LEASEHOLD_RETAIN_JOURNAL', async () => {
      expect((await parse(receiverCommand(), [])).opts.retainJournal, 'no retention unless asked').toBeUndefined();
      expect((await parse(receiverCommand(), ['--retain-journal', '7d'])).opts).toMatchObject({
        retainJournal: 604_800_000,
      });
      vi.stubEnv('LEASEHOLD_RETAIN_JOURNAL', '90s');
      expect((await parse(receiverCommand(), [])).opts).toMatchObject({ retainJournal: 90_000 });
      expect(await parse(receiverCommand(), ['--retain-journal', '1.5h'])).toMatchObject({
        exit: 2,
        stderr:
          'leasehold receiver: --retain-journal must be a positive duration such as 7d, 12h, 30m, 90s or 5000 ' +
          '(milliseconds), not "1.5h"\n',
      });
    });
  });

  test('every flag of every leasehold command has its LEASEHOLD_<FLAG> variable', () => {
    const commands = [
      queueCommand(),
      receiverCommand(),
      gatewayCommand(),
      workerCommand(),
      demoCommand(),
      startCommand(),
    ];
    const missing = commands.flatMap((command) =>
      command.options
        .filter((o) => o.envVar !== envVariable(o.long!))
        .map((o) => `${command.name()} ${o.long} (${o.envVar})`),
    );
    expect(missing).toEqual([]);
    expect(envVariable('--late-finish')).toBe('LEASEHOLD_LATE_FINISH');
    expect(envVariable('--receiver-timeout-ms')).toBe('LEASEHOLD_RECEIVER_TIMEOUT_MS');
  });
});

describe('start-up failures', () => {
  const errno = (code: string, more: object = {}) => Object.assign(new Error(`${code} something`), { code, ...more });

  test('each says what happened and what to do, on one line', () => {
    expect(startFailure(errno('EADDRINUSE', { port: 4100, syscall: 'listen' }))).toBe(
      'port 4100 is in use; pick another with --port, or --port 0 for a free one',
    );
    expect(startFailure(errno('EADDRINUSE', { syscall: 'listen' }), { port: 4300 })).toMatch(/^port 4300 is in use/);
    expect(startFailure(errno('EACCES', { port: 80, syscall: 'listen' }))).toMatch(
      /^port 80 needs privileges .* --port 0 for a free one$/,
    );
    expect(startFailure(errno('EADDRNOTAVAIL', { address: '10.9.9.9' }))).toMatch(
      /^cannot listen on 10\.9\.9\.9: .*--host$/,
    );
    expect(startFailure(errno('SQLITE_CANTOPEN'))).toMatch(/^cannot open the SQLite database: .*--db/);
    expect(
      startFailure(new RangeError('db "mysql://x" is a URL of an unsupported database;\nuse a postgres:// URL.')),
    ).toBe('could not start: db "mysql://x" is a URL of an unsupported database; use a postgres:// URL');
    const refused = Object.assign(new AggregateError([new Error('connect ECONNREFUSED ::1:5432')], ''), {
      code: 'ECONNREFUSED',
    });
    expect(startFailure(refused)).toBe(
      'cannot reach the database (connect ECONNREFUSED ::1:5432); check that it is running, or pick another with --db',
    );
  });
});

describe('withFlagNames', () => {
  const line = 'port 4100 is in use; pick another with --port, or --port 0 for a free one';

  test('renames each flag the map names, and leaves the others', () => {
    expect(withFlagNames(`${line}; see --host`, JSON.stringify({ '--port': '--queue-port' }))).toBe(
      'port 4100 is in use; pick another with --queue-port, or --queue-port 0 for a free one; see --host',
    );
  });

  test('no map, one that is not JSON, or not an object: the line as it was', () => {
    for (const names of [undefined, '', '{', '"--x"', 'null', JSON.stringify({ '--port': 7 })]) {
      expect(withFlagNames(line, names), String(names)).toBe(line);
    }
  });

  test('a flag that is only an inherited key of the map is not renamed', () => {
    expect(withFlagNames('use --constructor', '{}')).toBe('use --constructor');
  });
});
