// Starting a service from the command line, one way for the queue, the gateway and the receiver:
// its flags checked by the library's own resolvers (a mistake is a usage error naming the flag),
// the service started, its URL printed and its readiness logged; then stopped cleanly on
// SIGTERM/SIGINT, or when the process that started it with an IPC channel goes away.
import type { Command } from 'commander';
import type { Logger } from 'pino';
import { checkDatabaseFlags, checkOptions, failStart, flagNamesOf } from './flags.js';
import { resolveListenOptions, serverLimitsOf, type ServerLimits } from './listen.js';
import { createLogger, type ServiceName } from './logger.js';
import { redactDb } from './postgres.js';
import type { SqliteJournal } from './sqlite.js';

/** What every service's flags hold. */
export interface ServiceFlags extends ServerLimits {
  port: number;
  host: string;
  logLevel: string;
  /** The queue's and the receiver's database, logged with its secrets masked. */
  db?: string;
  /** SQLite's journal, beside `db`. */
  journal?: SqliteJournal;
  /** The gateway's and the receiver's signing secret. */
  secret?: string;
}

/** A started service, as `startQueue`, `startGateway` and `startReceiver` give it. */
export interface RunningService {
  url: string;
  close(): Promise<void>;
}

export interface ServiceMain<Flags extends ServiceFlags, Options, S extends RunningService> {
  service: Extract<ServiceName, 'queue' | 'gateway' | 'receiver'>;
  /** Option names the library gives a flag's value where they differ from the flag (`queueUrl` → `--queue`). */
  renamed?: Record<string, string>;
  /**
   * The library's options from the flags, checked by its own resolvers: a RangeError becomes a
   * usage error naming the flags; `command.error` is there for what only the command line knows.
   */
  resolve(flags: Flags, command: Command): Options;
  start(options: Options, logger: Logger): Promise<S>;
  /** Fields of the `<service> ready` log line beside `url` (and `db`, masked). */
  ready?(options: Options, flags: Flags): Record<string, unknown>;
  /** How long a stop may take before the process exits anyway (default 10 s). */
  forceExitMs?(options: Options): number;
}

export const DEFAULT_FORCE_EXIT_MS = 10_000;

/** The commander action of `leasehold <service>`. */
export function serviceAction<Flags extends ServiceFlags, Options, S extends RunningService>(
  main: ServiceMain<Flags, Options, S>,
): (flags: Flags, command: Command) => Promise<void> {
  return async (flags, command) => {
    if (flags.secret === '') {
      command.error('error: the secret is empty; set a non-empty --secret or LEASEHOLD_SECRET, or unset it.');
    }
    if (flags.db !== undefined) checkDatabaseFlags(command, { db: flags.db, journal: flags.journal ?? 'delete' });
    const options = checkOptions(command, flagNamesOf(command, main.renamed), () => {
      const options = main.resolve(flags, command);
      resolveListenOptions(serverLimitsOf(flags));
      return options;
    });
    await runService(main, flags, options);
  };
}

async function runService<Flags extends ServiceFlags, Options, S extends RunningService>(
  main: ServiceMain<Flags, Options, S>,
  flags: Flags,
  options: Options,
): Promise<void> {
  const logger = createLogger({ service: main.service, level: flags.logLevel });
  // Signals are handled from the start: a stop asked for while the service is still starting
  // (opening its database, migrating, binding its port) waits for the start, then closes what
  // it opened, instead of the process dying mid-way without a line.
  const starting = main.start(options, logger);
  let stopping = false;
  onShutdown(
    async () => {
      stopping = true;
      const started = await starting.catch(() => undefined);
      await started?.close();
    },
    logger,
    main.forceExitMs?.(options) ?? DEFAULT_FORCE_EXIT_MS,
  );
  let service: S;
  try {
    service = await starting;
  } catch (err) {
    failStart(main.service, err, { port: flags.port, logger });
  }
  if (stopping) return;
  logger.info(
    {
      url: service.url,
      ...(flags.db === undefined ? {} : { db: redactDb(flags.db) }),
      ...main.ready?.(options, flags),
    },
    `${main.service} ready`,
  );
  process.stdout.write(`leasehold ${main.service} listening on ${service.url}\n`);
}

/**
 * Runs `stop()` on SIGTERM or SIGINT, or when this process's IPC channel closes (its parent, which
 * started it with one, has exited or let it go), and exits 0 when it is done, 1 when it fails. A
 * second signal, or a stop that outlasts `forceAfterMs`, exits 1 at once (the timer is unref'd, so
 * it never keeps the process alive).
 */
export function onShutdown(
  stop: () => Promise<void>,
  logger: Pick<Logger, 'info' | 'warn' | 'error'>,
  forceAfterMs = DEFAULT_FORCE_EXIT_MS,
): void {
  let stopping = false;
  const handler = (why: NodeJS.Signals | 'parent gone') => {
    if (stopping) {
      logger.warn({ signal: why }, 'second signal: exiting without waiting');
      process.exit(1);
    }
    stopping = true;
    logger.info(why === 'parent gone' ? { parent: 'gone' } : { signal: why }, 'stopping');
    setTimeout(() => {
      logger.error(`did not stop within ${forceAfterMs} ms; exiting`);
      process.exit(1);
    }, forceAfterMs).unref();
    stop().then(
      () => {
        logger.info('stopped');
        process.exit(0);
      },
      (err: unknown) => {
        logger.error({ err }, 'error while stopping');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', handler);
  process.on('SIGINT', handler);
  onParentGone(() => {
    if (!stopping) handler('parent gone');
  });
}

/**
 * The parent as this module first saw it, when the command started: a parent that goes away
 * while the services are still starting counts as gone too.
 */
const PARENT_AT_START = process.ppid;

export interface ParentWatch {
  /**
   * Also count the parent gone when this process is handed to another (its parent exited, and
   * the system re-parented it), checked every `pollMs`: for a process with no IPC channel, such
   * as one started by a shell or npm. Off by default: `nohup` and `disown` rely on outliving the
   * shell.
   */
  reparented?: { pollMs: number };
}

/**
 * Calls `onGone` once when the process that started this one is gone: its IPC channel closes
 * (a parent that spawned it with one exited, however it ended, SIGKILL included), or with
 * `reparented`, the parent process id changes. Holds the process open for neither.
 */
export function onParentGone(onGone: () => void, watch: ParentWatch = {}): void {
  let gone = false;
  const once = () => {
    if (gone) return;
    gone = true;
    clearInterval(poll);
    onGone();
  };
  // Started with a channel (`send` is there) that has already closed: the parent is gone already.
  if (process.send !== undefined && !process.connected) process.nextTick(once);
  else if (process.channel) {
    process.channel.unref();
    process.once('disconnect', once);
  }
  const poll = watch.reparented
    ? setInterval(() => {
        if (process.ppid !== PARENT_AT_START) once();
      }, watch.reparented.pollMs).unref()
    : undefined;
}

/**
 * Calls `onClosed` once when the reader of stdout goes away (`leasehold ... | head`): the next
 * write fails with EPIPE, which would otherwise crash the process with a stack trace.
 */
export function onStdoutClosed(onClosed: () => void): void {
  let closed = false;
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE') throw err;
    if (closed) return;
    closed = true;
    onClosed();
  });
}
