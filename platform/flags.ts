// The command line of every leasehold command: each flag also read from LEASEHOLD_<FLAG>, one
// parser per kind of value, and one error path — a usage error is one line and exit code 2, a
// start-up failure one line and exit code 1.
import type { SqliteJournal } from './sqlite.js';
import { LISTEN_DEFAULTS } from './listen.js';
import { startFailureOfDatabase } from './database-errors.js';
import { isPostgresUrl, parsePostgresUrl } from './postgres.js';
import { Command, InvalidArgumentError, Option, type CommanderError } from 'commander';

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** `--late-finish` → `LEASEHOLD_LATE_FINISH`. */
export function envVariable(longFlag: string): string {
  return `LEASEHOLD_${longFlag.replace(/^--/, '').replace(/-/g, '_').toUpperCase()}`;
}

/** Every long flag added to it also reads its LEASEHOLD_<FLAG> variable; the flag beats the variable. */
class LeaseholdCommand extends Command {
  override addOption(option: Option): this {
    if (option.long !== undefined && !option.negate && option.envVar === undefined) {
      option.env(envVariable(option.long));
    }
    return super.addOption(option);
  }
}

/** `leasehold <name>`: flags with their variables, and usage errors as one line and exit code 2. */
export function leaseholdCommand(name: string): Command {
  const command = new LeaseholdCommand(name);
  command.hook('preAction', (_command, action) => checkBooleanVariables(action));
  return usageErrors(command, `leasehold ${name}`);
}

/**
 * A usage error — a bad flag value, an unknown flag, `command.error(...)` — prints one line,
 * `<program>: <what is wrong>`, and exits 2. Help and version still exit 0.
 */
export function usageErrors<C extends Command>(command: C, program: string): C {
  command.configureOutput({ outputError: () => {} });
  command.exitOverride((err) => {
    if (err.exitCode !== 0 && !SILENT_EXITS.has(err.code)) {
      process.stderr.write(`${program}: ${usageLine(err, program)}\n`);
    }
    process.exit(err.exitCode === 0 ? 0 : 2);
  });
  return command;
}

/** Exits that have already printed what they had to say (help, version). */
const SILENT_EXITS = new Set(['commander.help', 'commander.helpDisplayed', 'commander.version']);
/** Errors about the command line's shape, where the help is the way out. */
const POINT_TO_HELP = new Set([
  'commander.unknownOption',
  'commander.unknownCommand',
  'commander.excessArguments',
  'commander.missingArgument',
  'commander.optionMissingArgument',
  'commander.missingMandatoryOptionValue',
  'commander.conflictingOption',
]);
/** commander's wording of a value a parser refused: `error: option '--port <port>' argument 'x' is invalid. <parser's message>`. */
const INVALID_VALUE =
  /^error: option '(.+?)' (?:argument '[\s\S]*' |value '[\s\S]*' from env '(\w+)' )is invalid\. ([\s\S]*)$/;

/** The one line a usage error prints after `<program>: `; the parsers' messages say what to do. */
export function usageLine(err: Pick<CommanderError, 'code' | 'message'>, program: string): string {
  const invalid = INVALID_VALUE.exec(err.message);
  // The subject is where the value came from: the flag, or the variable that stood in for it.
  if (invalid) return oneLine(`${invalid[2] ?? /--[\w-]+/.exec(invalid[1]!)?.[0] ?? invalid[1]} ${invalid[3]}`);
  const text = oneLine(err.message.replace(/^error: /, ''));
  return POINT_TO_HELP.has(err.code) ? `${text}; see ${program} --help` : text;
}

/**
 * commander sets a boolean flag when its variable merely exists; here `LEASEHOLD_TEST_MODE=0`
 * means off, as an operator would expect, and a value that is neither is a usage error.
 */
function checkBooleanVariables(command: Command): void {
  for (const option of command.options) {
    if (!option.isBoolean() || option.envVar === undefined) continue;
    const key = option.attributeName();
    if (command.getOptionValueSource(key) !== 'env') continue;
    const raw = process.env[option.envVar] ?? '';
    if (/^(true|1)$/i.test(raw)) continue;
    if (/^(false|0|)$/i.test(raw)) command.setOptionValueWithSource(key, false, 'env');
    else command.error(`error: ${option.envVar} must be true or false (or 1 or 0), not ${JSON.stringify(raw)}`);
  }
}

/** Joined onto one line, without a closing full stop: the line may go on (`; see ... --help`). */
function oneLine(text: string): string {
  return text
    .trim()
    .replace(/\s*\n\s*/g, ' ')
    .replace(/\.$/, '');
}

// Parsers: each takes the text of a flag or variable and throws a message that follows its name.

const DIGITS = /^\d+$/;

/** A TCP port, digits only: `1e3`, `-1` and the empty string are refused, not read as numbers. */
export function parsePort(value: string): number {
  if (!DIGITS.test(value) || Number(value) > 65_535) {
    throw new InvalidArgumentError(
      `must be an integer from 0 to 65535 (0 picks a free port), not ${JSON.stringify(value)}`,
    );
  }
  return Number(value);
}

/** A parser of whole numbers, digits only, from `min` up. */
export function integerAtLeast(min: number): (value: string) => number {
  const wanted = min === 0 ? 'a whole number' : min === 1 ? 'a positive integer' : `an integer of at least ${min}`;
  return (value) => {
    const n = Number(value);
    if (!DIGITS.test(value) || !Number.isSafeInteger(n) || n < min) {
      throw new InvalidArgumentError(`must be ${wanted}, not ${JSON.stringify(value)}`);
    }
    return n;
  };
}

export const parsePositiveInt = integerAtLeast(1);
export const parseWholeNumber = integerAtLeast(0);

/** `auto`, or a whole number (the worker's `--prefetch`, and the benchmark's). */
export function parseAutoOrWholeNumber(value: string): number | 'auto' {
  if (value === 'auto') return value;
  const n = Number(value);
  if (!DIGITS.test(value) || !Number.isSafeInteger(n)) {
    throw new InvalidArgumentError(`must be "auto" or a whole number, not ${JSON.stringify(value)}`);
  }
  return n;
}

const DURATION = /^(\d+)(ms|s|m|h|d)?$/;
const UNIT_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/**
 * A positive duration in milliseconds: digits and a unit (`7d`, `12h`, `30m`, `90s`, `250ms`),
 * or digits alone for milliseconds. Fractions, signs, spaces and mixed units (`1h30m`) are
 * refused rather than guessed at.
 */
export function parseDuration(value: string): number {
  const match = DURATION.exec(value);
  const ms = match ? Number(match[1]) * UNIT_MS[(match[2] ?? 'ms') as keyof typeof UNIT_MS] : NaN;
  if (!Number.isSafeInteger(ms) || ms < 1) {
    throw new InvalidArgumentError(
      `must be a positive duration such as 7d, 12h, 30m, 90s or 5000 (milliseconds), not ${JSON.stringify(value)}`,
    );
  }
  return ms;
}

/** A parser that accepts only the listed words. */
export function oneOf<T extends string>(choices: readonly T[]): (value: string) => T {
  return (value) => {
    if (!(choices as readonly string[]).includes(value)) {
      throw new InvalidArgumentError(`must be one of ${choices.join(', ')}, not ${JSON.stringify(value)}`);
    }
    return value as T;
  };
}

// Flags several commands share.

/** `--port`: the port a service listens on. */
export function portOption(defaultPort: number): Option {
  return new Option('--port <port>', 'TCP port to listen on; 0 picks a free port')
    .argParser(parsePort)
    .default(defaultPort);
}

/** `--log-level`: how much the service logs, as JSON lines on stderr. */
export function logLevelOption(description = 'level of the JSON logs written to stderr'): Option {
  return new Option('--log-level <level>', description)
    .choices(LOG_LEVELS)
    .argParser(oneOf(LOG_LEVELS))
    .default('info');
}

/** `--db`: a SQLite file or a postgres:// URL; DATABASE_URL, when set, stands in for the default. */
export function dbOption(defaultFile: string, description: string): Option {
  const fromEnvironment = process.env.DATABASE_URL;
  return new Option('--db <path-or-url>', description).default(
    fromEnvironment || defaultFile,
    `${defaultFile}, or DATABASE_URL when set`,
  );
}

/**
 * The library's option names as the user gave their values: every option of `command` by its
 * attribute name (`headersTimeoutMs` → `--headers-timeout-ms`), plus `renamed` where the library
 * calls a value something else than its flag does (`queueUrl` → `--queue`); a value that came
 * from the flag's variable is named by the variable (`LEASEHOLD_WAIT_MS`), since that is where
 * the user must change it.
 */
export function flagNamesOf(command: Command, renamed: Record<string, string> = {}): Record<string, string> {
  const shown = new Map<string, string>();
  const derived: Record<string, string> = {};
  for (const option of command.options) {
    if (option.long === undefined) continue;
    const fromVariable = command.getOptionValueSource(option.attributeName()) === 'env';
    const name = fromVariable ? envVariable(option.long) : option.long;
    shown.set(option.long, name);
    derived[option.attributeName()] = name;
  }
  const renamedShown = Object.fromEntries(
    Object.entries(renamed).map(([field, flag]) => [field, shown.get(flag) ?? flag]),
  );
  return { ...derived, ...renamedShown };
}

/**
 * Runs a library's option check (`resolveGatewayOptions`...) on the flags; its RangeError, which
 * names the library's fields, becomes a usage error that names the flags (`flagNames`) instead.
 */
export function checkOptions<T>(command: Command, flagNames: Record<string, string>, check: () => T): T {
  try {
    return check();
  } catch (err) {
    if (!(err instanceof RangeError)) throw err;
    const fields = Object.keys(flagNames);
    const message =
      fields.length === 0
        ? err.message
        : err.message.replace(new RegExp(`\\b(${fields.join('|')})\\b`, 'g'), (name) => flagNames[name] ?? name);
    return command.error(`error: ${message}`);
  }
}

// Start-up failures.

export interface StartContext {
  /** The port asked for, when the error does not carry it. */
  port?: number;
  /** Gets the error with its stack, at debug level. */
  logger?: { debug(obj: object, msg: string): void };
}

/** A service that could not start: one line on stderr saying why and what to do, exit code 1. */
export function failStart(service: string, err: unknown, context: StartContext = {}): never {
  context.logger?.debug({ err }, 'could not start');
  const line = withFlagNames(startFailure(err, context), process.env[FLAG_NAMES_VARIABLE]);
  process.stderr.write(`leasehold ${service}: ${line}\n`);
  process.exit(1);
}

/**
 * Set by a command that starts a service as its child under flags of its own (`leasehold start`
 * gives the queue's port as `--queue-port`): a JSON object from the service's flag to the
 * command's, so that a failed start names the flag the user typed.
 */
export const FLAG_NAMES_VARIABLE = 'LEASEHOLD_FLAG_NAMES';

/** `message` with each flag `names` maps renamed; a missing or unreadable map changes nothing. */
export function withFlagNames(message: string, names: string | undefined): string {
  if (!names) return message;
  let map: unknown;
  try {
    map = JSON.parse(names);
  } catch {
    return message;
  }
  if (typeof map !== 'object' || map === null) return message;
  return message.replace(/--[a-z][a-z-]*/g, (flag) => {
    const name = (map as Record<string, unknown>)[flag];
    return Object.hasOwn(map as object, flag) && typeof name === 'string' ? name : flag;
  });
}

/** Why a service could not start, in one line. */
export function startFailure(err: unknown, context: Pick<StartContext, 'port'> = {}): string {
  const database = startFailureOfDatabase(err);
  if (database !== undefined) return database;
  const e = (err ?? {}) as NodeJS.ErrnoException & { port?: number; address?: string; hostname?: string };
  // At start-up the only folder a service makes is its SQLite file's.
  if (e.syscall === 'mkdir') {
    return `cannot make the folder ${e.path ?? ''} for the database (${messageOf(err)}); pick a --db in a folder this process may write to`;
  }
  switch (e.code) {
    case 'EADDRINUSE':
      return `port ${e.port ?? context.port} is in use; pick another with --port, or --port 0 for a free one`;
    case 'EACCES':
      if (e.syscall === 'listen') {
        return `port ${e.port ?? context.port} needs privileges this process lacks; pick one from 1024 up with --port, or --port 0 for a free one`;
      }
      break;
    case 'EADDRNOTAVAIL':
      return `cannot listen on ${e.address ?? 'that address'}: this machine has no such address; pick another with --host`;
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      if (e.syscall === 'getaddrinfo') return `cannot resolve the host "${e.hostname}"; pick another with --host`;
      break;
    case 'ECONNREFUSED':
      // At start-up the only connection a service opens is to its database.
      return `cannot reach the database (${messageOf(err)}); check that it is running, or pick another with --db`;
    case 'SQLITE_CANTOPEN':
      return 'cannot open the SQLite database: check that --db names a file (not a folder) in a folder this process may write to';
  }
  return `could not start: ${messageOf(err)}`;
}

function messageOf(err: unknown): string {
  if (err instanceof AggregateError && !err.message && err.errors.length > 0) return messageOf(err.errors[0]);
  return oneLine(err instanceof Error ? err.message || err.name : String(err));
}

const JOURNALS: readonly SqliteJournal[] = ['delete', 'wal'];

/** `--journal delete|wal`: SQLite's journal; synchronous stays FULL either way. */
export function journalOption(): Option {
  return new Option(
    '--journal <mode>',
    'SQLite journal: delete (the rollback journal) or wal; both sync every commit (synchronous=FULL)',
  )
    .choices(JOURNALS)
    .argParser(oneOf(JOURNALS))
    .default('delete');
}

/**
 * `--db` and `--journal` together, as only the command line can judge them: an empty `--db`, and
 * `--journal wal` with a PostgreSQL database, which keeps its own write-ahead log and would
 * ignore the flag while the ready line claimed it.
 */
export function checkDatabaseFlags(command: Command, flags: { db: string; journal: SqliteJournal }): void {
  const name = dbNameOf(command);
  if (flags.db === '') command.error(`error: ${name} is empty; give a SQLite file path, :memory: or a postgres:// URL`);
  if (!isPostgresUrl(flags.db)) return;
  if (flags.journal !== 'delete') {
    command.error(
      `error: --journal ${flags.journal} is for SQLite; a postgres:// database keeps its own write-ahead log, so leave --journal out`,
    );
  }
  try {
    parsePostgresUrl(flags.db);
  } catch (err) {
    command.error(`error: ${name} ${(err as Error).message}`);
  }
}

/** Where `--db`'s value came from: as flagNamesOf names it, or DATABASE_URL standing in for the default. */
function dbNameOf(command: Command): string {
  if (command.getOptionValueSource('db') === 'default' && process.env.DATABASE_URL) return 'DATABASE_URL';
  return flagNamesOf(command).db ?? '--db';
}

/** `--api-key`: the key a service requires (queue, gateway), or a client presents (worker, gateway). */
export function apiKeyOption(description: string): Option {
  return new Option('--api-key <key>', description);
}

/** The help line on keeping secrets off the command line, for a command with `--api-key` (and `--secret`). */
export const SECRETS_IN_VARIABLES =
  'Prefer LEASEHOLD_API_KEY to --api-key (and LEASEHOLD_SECRET to --secret): command lines are visible to other users of the machine.';

// How much a client may take of a service: `--first-byte-timeout-ms`, `--headers-timeout-ms`,
// `--request-timeout-ms`, `--max-connections`.

/** No default of its own: left out, it is 3 s, or `--headers-timeout-ms` when that is shorter. */
export function firstByteTimeoutOption(): Option {
  return new Option(
    '--first-byte-timeout-ms <ms>',
    `a new connection must send its first byte within this long, or it is closed (default: ${LISTEN_DEFAULTS.firstByteTimeoutMs}, or --headers-timeout-ms when shorter)`,
  ).argParser(integerAtLeast(1));
}

export function headersTimeoutOption(): Option {
  return new Option(
    '--headers-timeout-ms <ms>',
    "a request's headers must arrive within this long, or the connection is cut",
  )
    .argParser(integerAtLeast(1))
    .default(LISTEN_DEFAULTS.headersTimeoutMs);
}

export function requestTimeoutOption(): Option {
  return new Option(
    '--request-timeout-ms <ms>',
    'a whole request must arrive within this long, or the connection is cut (the answer may take longer)',
  )
    .argParser(integerAtLeast(1))
    .default(LISTEN_DEFAULTS.requestTimeoutMs);
}

export function maxConnectionsOption(): Option {
  return new Option('--max-connections <n>', 'connections held at once; more are closed as they arrive')
    .argParser(integerAtLeast(1))
    .default(LISTEN_DEFAULTS.maxConnections);
}
