// Starting the queue as a library: open and migrate the store, build the app, listen.
// `main.ts` wraps this for the command line; tests and embedders call it directly.
import { dirname } from 'node:path';
import pino, { type Logger } from 'pino';
import { createQueueApp } from './app.js';
import { checkClock } from '../platform/clock.js';
import { makeDirectory } from '../platform/directories.js';
import {
  checkHost,
  checkPort,
  listen,
  LISTEN_OPTION_NAMES,
  serverLimitsOf,
  type ServerLimits,
} from '../platform/listen.js';
import { checkRequiredOptions, type OptionNames } from '../platform/option-names.js';
import { checkDbOption, isPostgresUrl, looksLikeUrl, redactDb } from '../platform/postgres.js';
import { openPostgresQueueStore } from './postgres-store.js';
import { openSqliteQueueStore } from './sqlite-store.js';
import type { QueueStore } from './store.js';
import type { Clock, Job, LateFinishPolicy } from './types.js';
import { KnexQueueStore } from './knex-store.js';
import type { SqliteJournal } from '../platform/sqlite.js';

export interface QueueServiceOptions extends ServerLimits {
  /**
   * A SQLite file path (created with its folder when missing) or `:memory:`; or a
   * `postgres://` (`postgresql://`) URL, optionally with `?schema=NAME` (created when missing).
   */
  db: string;
  host?: string | undefined;
  /** 0 picks a free port. */
  port?: number | undefined;
  latePolicy?: LateFinishPolicy | undefined;
  /** The queue's clock (default: the system's). On PostgreSQL it replaces the server's clock: tests only. */
  clock?: Clock | undefined;
  logger?: Logger | undefined;
  /** SQLite only: the journal (default `delete`, the rollback journal; `wal` is as durable). */
  journal?: SqliteJournal | undefined;
  /** SQLite only: the group commit's window in ms (default 2; 0 turns it off). */
  commitWindowMs?: number | undefined;
  /** When set, every request but `GET /healthz` requires `Authorization: Bearer <apiKey>`. */
  apiKey?: string | undefined;
  /**
   * Allows `expireLease` and `reset`, for tests in this process (the test kit). Never on unless
   * asked for; there is no HTTP route for either.
   */
  testMode?: boolean | undefined;
  /** The most long-polling claims waiting at once (default 512); one more is `503 too_many_waiters`. */
  maxClaimWaiters?: number | undefined;
}

export interface QueueService {
  url: string;
  store: QueueStore;
  /**
   * Test mode only: the lease of `jobId` ends now, on the queue's clock; its holder is refused
   * from then on and the job is claimable. Rejects without test mode, and for a job that is not
   * leased.
   */
  expireLease(jobId: string): Promise<Job>;
  /** Test mode only: erases every job. */
  reset(): Promise<void>;
  close(): Promise<void>;
}

type QueueStoreOptions = Pick<QueueServiceOptions, 'db' | 'latePolicy' | 'clock' | 'journal' | 'commitWindowMs'>;

const QUEUE_STORE_OPTION_NAMES: OptionNames<QueueStoreOptions> = {
  db: true,
  latePolicy: true,
  clock: true,
  journal: true,
  commitWindowMs: true,
};

/** Opens and migrates the store `db` names: PostgreSQL for a postgres:// URL, SQLite otherwise. */
export async function openQueueStore(options: QueueStoreOptions): Promise<QueueStore> {
  checkRequiredOptions('openQueueStore', options, QUEUE_STORE_OPTION_NAMES);
  checkDbOption(options.db);
  checkClock(options.clock);
  if (isPostgresUrl(options.db)) {
    return openPostgresQueueStore({
      connectionString: options.db,
      // On PostgreSQL the server's clock decides; an injected clock replaces it (tests only).
      ...(options.clock ? { clock: options.clock } : {}),
      latePolicy: options.latePolicy ?? 'reject',
    });
  }
  if (looksLikeUrl(options.db)) {
    throw new Error(`Unsupported database URL "${redactDb(options.db)}": use a postgres:// URL or a SQLite file path.`);
  }
  if (options.db !== ':memory:') makeDirectory(dirname(options.db));
  return openSqliteQueueStore({
    filename: options.db,
    ...(options.clock ? { clock: options.clock } : {}),
    ...(options.journal ? { journal: options.journal } : {}),
    ...(options.commitWindowMs !== undefined ? { commitWindowMs: options.commitWindowMs } : {}),
    latePolicy: options.latePolicy ?? 'reject',
  });
}

const QUEUE_SERVICE_OPTION_NAMES: OptionNames<QueueServiceOptions> = {
  ...LISTEN_OPTION_NAMES,
  db: true,
  latePolicy: true,
  clock: true,
  logger: true,
  journal: true,
  commitWindowMs: true,
  apiKey: true,
  testMode: true,
  maxClaimWaiters: true,
};

export async function startQueue(options: QueueServiceOptions): Promise<QueueService> {
  checkRequiredOptions('startQueue', options, QUEUE_SERVICE_OPTION_NAMES);
  const logger = options.logger ?? pino({ level: 'silent' });
  // Checked before the store is opened, so a bad option leaves no file behind.
  const port = checkPort(options.port);
  const host = checkHost(options.host);
  const { db, latePolicy, clock, journal, commitWindowMs } = options;
  const store = await openQueueStore({ db, latePolicy, clock, journal, commitWindowMs });
  let app;
  try {
    app = createQueueApp({ store, logger, apiKey: options.apiKey, maxClaimWaiters: options.maxClaimWaiters });
  } catch (err) {
    await store.close();
    throw err;
  }
  let listening;
  try {
    listening = await listen(app, host, port, serverLimitsOf(options));
  } catch (err) {
    app.close();
    await store.close();
    throw err;
  }
  const { url } = listening;
  const testStore = () => {
    if (options.testMode !== true || !(store instanceof KnexQueueStore)) {
      throw new Error(
        'The queue was not started in test mode: start it with testMode: true to end leases or erase jobs.',
      );
    }
    return store;
  };
  return {
    url,
    store,
    expireLease: async (jobId) => testStore().expireLease(jobId),
    reset: async () => testStore().eraseJobs(),
    close: async () => {
      // Long-polling claims are answered first (204), so they do not hold the close up.
      app.close();
      await listening.close();
      await store.close();
    },
  };
}
