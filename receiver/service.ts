// `startReceiver`: opens and migrates the store, builds the app and listens — one call used by
// `leasehold receiver` and by other projects that start the receiver as a stub in their tests.
import { pino, type Logger } from 'pino';
import { createReceiverApp } from './app.js';
import { FaultController } from './faults.js';
import { openSqliteEffectStore } from './sqlite-store.js';
import type { SqliteJournal } from '../platform/sqlite.js';
import { openPostgresEffectStore } from './postgres-store.js';
import { checkDbOption, isPostgresUrl, looksLikeUrl, redactDb } from '../platform/postgres.js';
import {
  checkHost,
  checkPort,
  listen,
  resolveListenOptions,
  LISTEN_OPTION_NAMES,
  serverLimitsOf,
  type Listening,
  type ServerLimits,
} from '../platform/listen.js';
import { checkClock } from '../platform/clock.js';
import { checkOptionNames, type OptionNames } from '../platform/option-names.js';
import { checkEffectKeyArgument, checkJobIdArgument, checkWaitMs, describeValue } from '../platform/describe-value.js';
import type { Clock, Effect } from './rules.js';
import type { EffectStore, JournalEntry, Totals } from './store.js';
import { retainJournal } from './retention.js';

export interface StartReceiverOptions extends ServerLimits {
  /** Default 0: a free port. */
  port?: number | undefined;
  /** Default 127.0.0.1. */
  host?: string | undefined;
  /**
   * A SQLite file path (parent directory created) or `:memory:` (the default); or a
   * `postgres://` URL, optionally with `?schema=NAME`, which several receivers may share.
   */
  db?: string | undefined;
  /** Requires a valid Leasehold-Signature on POST /effects. */
  secret?: string | undefined;
  /**
   * Fault injection and the /admin routes, among them `POST /admin/reset`, which erases every
   * effect and highest token: never for a receiver whose effects matter. Default: on for a stub on
   * `:memory:` (the default db), off for any file or PostgreSQL database. The CLI passes false
   * unless --test-mode.
   */
  testMode?: boolean | undefined;
  clock?: Clock | undefined;
  /** Default: silent. */
  logger?: Logger | undefined;
  /** SQLite only: the journal (default `delete`, the rollback journal; `wal` is as durable). */
  journal?: SqliteJournal | undefined;
  /**
   * Deletes journal entries older than this many milliseconds, at start and then every tenth of
   * it (between 1 s and 1 h). Effects and highest tokens are always kept. `'keep'` keeps the
   * whole journal. Default: 30 days on a file or PostgreSQL, where every judged request (a
   * replayed one included) adds an entry that would otherwise stay for good; `'keep'` for a
   * stub in memory, which loses everything on close anyway.
   */
  retainJournalMs?: number | 'keep' | undefined;
}

/** How long a receiver whose database outlives it keeps journal entries, unless told otherwise. */
export const DEFAULT_RETAIN_JOURNAL_MS = 30 * 24 * 3_600_000;

export interface ReceiverHandle {
  /** `http://<host>:<port>`, without a trailing slash. */
  url: string;
  port: number;
  /**
   * Every applied effect, by jobId and key, or only `jobId`'s (its default effect first), read
   * from the store (not over HTTP).
   */
  effects(filter?: { jobId?: string }): Promise<Effect[]>;
  /** The effect applied for `(jobId, key)` (`key` left out: the job's default effect), or undefined. */
  effect(jobId: string, key?: string): Promise<Effect | undefined>;
  totals(): Promise<Totals>;
  /** Every judged request, outcome included, in the order it was judged. */
  journal(): Promise<JournalEntry[]>;
  /**
   * The effect for `jobId` (with `key`, its keyed effect) once it is applied: for code under test
   * that sends in the background. Rejects after `timeoutMs` (default 5000) with an Error naming
   * the effect and the effects there are.
   */
  waitForEffect(jobId: string, options?: { timeoutMs?: number; key?: string }): Promise<Effect>;
  /** Forgets effects, journal and queued faults: call it between test cases. */
  reset(): Promise<void>;
  /** Queue faults for the next POST /effects requests (test mode only; throws otherwise). */
  faults: FaultController;
  /**
   * Stops listening, lets requests in flight finish for up to `graceMs` (default 2000) before
   * closing their connections, then closes the store. Safe to call twice.
   */
  close(options?: { graceMs?: number }): Promise<void>;
}

interface ResolvedOptions {
  port: number;
  host: string;
  db: string;
  secret: string | undefined;
  testMode: boolean;
  clock: Clock;
  logger: Logger;
  journal: SqliteJournal;
  retainJournalMs: number | undefined;
  limits: ServerLimits;
}

const START_RECEIVER_OPTION_NAMES: OptionNames<StartReceiverOptions> = {
  ...LISTEN_OPTION_NAMES,
  db: true,
  secret: true,
  testMode: true,
  clock: true,
  logger: true,
  journal: true,
  retainJournalMs: true,
};

/** Defaults and checks in one place; everything below takes only the resolved shape. */
export function resolveStartOptions(options: StartReceiverOptions): ResolvedOptions {
  checkOptionNames('startReceiver', options, START_RECEIVER_OPTION_NAMES);
  const port = checkPort(options.port);
  const host = checkHost(options.host);
  if (options.secret !== undefined && typeof options.secret !== 'string')
    throw new TypeError(`secret must be a string, not ${describeValue(options.secret)}.`);
  if (options.secret === '')
    throw new RangeError('secret must not be empty; leave it out to accept unsigned requests.');
  const db = checkDbOption(options.db ?? ':memory:');
  const clock = checkClock(options.clock);
  if (looksLikeUrl(db) && !isPostgresUrl(db)) {
    throw new RangeError(
      `db "${redactDb(db)}" is a URL of an unsupported database; use a postgres:// URL or a SQLite file path.`,
    );
  }
  // Checked here, before any store is opened; listen() fills in the defaults.
  resolveListenOptions(options);
  const retain = options.retainJournalMs ?? (db === ':memory:' ? 'keep' : DEFAULT_RETAIN_JOURNAL_MS);
  if (retain !== 'keep' && (!Number.isSafeInteger(retain) || retain < 1)) {
    throw new RangeError(
      `retainJournalMs must be a positive integer number of milliseconds, not ${String(retain)}; give 'keep' to keep the whole journal.`,
    );
  }
  const retainJournalMs = retain === 'keep' ? undefined : retain;
  return {
    port,
    host,
    db,
    secret: options.secret,
    // A stub in memory loses everything on close anyway; a database that outlives the process
    // must not be erasable by an unauthenticated POST /admin/reset unless asked for.
    testMode: options.testMode ?? db === ':memory:',
    clock,
    logger: options.logger ?? pino({ level: 'silent' }),
    journal: options.journal ?? 'delete',
    retainJournalMs,
    limits: serverLimitsOf(options),
  };
}

export async function startReceiver(options: StartReceiverOptions = {}): Promise<ReceiverHandle> {
  const resolved = resolveStartOptions(options);
  const { logger, clock } = resolved;
  const store = isPostgresUrl(resolved.db)
    ? await openPostgresEffectStore({ connectionString: resolved.db })
    : await openSqliteEffectStore({ filename: resolved.db, journal: resolved.journal });
  const faults = new FaultController(resolved.testMode);
  const app = createReceiverApp({
    store,
    clock,
    secret: resolved.secret,
    logger,
    faults: resolved.testMode ? faults : undefined,
  });
  let listening: Listening;
  try {
    listening = await listen(app, resolved.host, resolved.port, resolved.limits);
  } catch (err) {
    await store.close();
    throw err;
  }
  const { url, port } = listening;
  const retention =
    resolved.retainJournalMs === undefined
      ? undefined
      : retainJournal(store, { retainMs: resolved.retainJournalMs, clock, logger });

  let closing: Promise<void> | undefined;
  const close = async (graceMs: number) => {
    await retention?.stop();
    await listening.close(graceMs);
    faults.clear();
    await store.close();
  };

  // A read after close() would reach a closed store, whose error says nothing of why.
  const open = (method: string) => {
    if (closing) throw new Error(`receiver.${method}: the receiver is closed; start another with startReceiver().`);
  };
  return {
    url,
    port,
    effects: async (filter) => {
      open('effects');
      checkOptionNames('effects', filter, { jobId: true });
      return store.listEffects(filter?.jobId === undefined ? {} : { jobId: filter.jobId });
    },
    effect: async (jobId, key) => {
      open('effect');
      checkJobIdArgument('effect', jobId);
      checkKeyArgument('effect', key);
      return store.getEffect(jobId, key);
    },
    totals: async () => {
      open('totals');
      return store.totals();
    },
    journal: async () => {
      open('journal');
      return store.journal();
    },
    waitForEffect: async (jobId, waitOptions) => {
      open('waitForEffect');
      checkJobIdArgument('waitForEffect', jobId);
      checkOptionNames('waitForEffect', waitOptions, { timeoutMs: true, key: true });
      checkKeyArgument('waitForEffect', waitOptions?.key);
      return waitForEffect(store, { jobId, key: waitOptions?.key }, waitOptions?.timeoutMs ?? 5_000);
    },
    reset: async () => {
      open('reset');
      // As POST /admin/reset: erasing highest tokens that outlive the process would let a stale
      // worker's effect be applied again.
      if (!resolved.testMode) {
        throw new Error(
          'The receiver was not started in test mode: start it with testMode: true to erase its effects and highest tokens.',
        );
      }
      faults.clear();
      await store.reset();
    },
    faults,
    close: async (closeOptions) => {
      checkOptionNames('close', closeOptions, { graceMs: true });
      return (closing ??= close(closeOptions?.graceMs ?? 2_000));
    },
  };
}

/** How often waitForEffect looks: short enough for a test, and a read of one row each time. */
const EFFECT_POLL_MS = 10;

async function waitForEffect(
  store: EffectStore<unknown>,
  wanted: { jobId: string; key: string | undefined },
  timeoutMs: number,
): Promise<Effect> {
  checkWaitMs('timeoutMs', timeoutMs);
  const { jobId, key } = wanted;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const effect = await store.getEffect(jobId, key);
    if (effect) return effect;
    if (Date.now() >= deadline) {
      const there = (await store.listEffects()).map((e) =>
        e.key === undefined ? e.jobId : `${e.jobId} (key ${e.key})`,
      );
      const shown = there.length <= 10 ? there.join(', ') : `${there.slice(0, 10).join(', ')}, ...`;
      const what = key === undefined ? `job "${jobId}"` : `job "${jobId}", key "${key}",`;
      throw new Error(
        `No effect for ${what} arrived within ${timeoutMs} ms; the receiver has ${there.length} effect${there.length === 1 ? '' : 's'}${there.length > 0 ? ` (${shown})` : ''}.`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, EFFECT_POLL_MS));
  }
}

/** A key read from the handle: left out for the job's default effect, else one some effect could have. */
function checkKeyArgument(method: string, key: unknown): void {
  if (key === undefined) return;
  if (typeof key !== 'string') {
    throw new TypeError(
      `${method}: key must be an effect's key, a string, or left out for the default effect; not ${describeValue(key)}.`,
    );
  }
  checkEffectKeyArgument(method, key, 'leave key out');
}
