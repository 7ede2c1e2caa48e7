// The library's entry points refuse an option of the wrong kind where it is given, naming it,
// before anything is opened or listens: a JavaScript caller has no types to catch it, and the
// mistake would otherwise surface later, far from its cause (a clock without now() as a 500 on
// every request, a port given as a string as a Unix socket of that name in the working folder).
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { createForwarder, createGatewayApp, GatewayClient, startGateway } from '../../gateway/index.js';
import {
  ClaimWaiters,
  createQueueApp,
  openQueueStore,
  openSqliteQueueStore,
  QueueClient,
  startQueue,
} from '../../queue/index.js';
import {
  createReceiverApp,
  fencedEffects,
  migrateDownstream,
  openSqliteEffectStore,
  ReceiverClient,
  startReceiver,
} from '../../receiver/index.js';
import { audit } from '../../audit/index.js';
import { conform } from '../../conform/index.js';
import { startSystem } from '../../testing/index.js';
import { createWorker, FreshAgent, runWorker, stallHooks, Worker } from '../../worker/index.js';
import { tempDir } from '../helpers/tmp.js';
import { typeErrors } from '../helpers/type-errors.js';

const anyway = (value: unknown) => value as never;
const CLOCK = 'clock must be an object with a now() method, not {}.';
const PORT = 'port must be an integer from 0 to 65535 (0 picks a free port), not "4100".';
const GATEWAY = { queueUrl: 'http://127.0.0.1:1', receiverUrl: 'http://127.0.0.1:2' };

describe('startQueue', () => {
  test.each([
    [{}, `db must be ":memory:", a SQLite file's path or a postgres:// URL, not undefined.`],
    [{ db: 5 }, `db must be ":memory:", a SQLite file's path or a postgres:// URL, not 5.`],
    [{ db: ':memory:', clock: {} }, CLOCK],
    [{ db: ':memory:', port: '4100' }, PORT],
    [{ db: ':memory:', host: '' }, 'host must be an address or a host name such as 127.0.0.1, not "".'],
    [{ db: ':memory:', apiKey: 5 }, 'apiKey must be a string, not 5.'],
  ])('%j is refused, naming the option', async (options, message) => {
    await expect(startQueue(anyway(options))).rejects.toThrow(message);
  });

  test('a bad port is refused before the database file is made', async () => {
    const db = join(tempDir('leasehold-options-'), 'queue.sqlite');
    await expect(startQueue({ db, port: anyway('4100') })).rejects.toThrow(PORT);
    expect(existsSync(db)).toBe(false);
  });
});

describe('startReceiver', () => {
  test.each([
    [{ clock: {} }, CLOCK],
    [{ port: '4100' }, PORT],
    [{ secret: 5 }, 'secret must be a string, not 5.'],
    [{ db: 5 }, `db must be ":memory:", a SQLite file's path or a postgres:// URL, not 5.`],
  ])('%j is refused, naming the option', async (options, message) => {
    await expect(startReceiver(anyway(options))).rejects.toThrow(message);
  });
});

describe('startGateway', () => {
  test.each([
    [{ ...GATEWAY, clock: {} }, CLOCK],
    [{ ...GATEWAY, port: '4100' }, PORT],
    [{ ...GATEWAY, secret: 5 }, 'secret must be a string, not 5.'],
    [{ ...GATEWAY, downstreams: 5 }, 'downstreams must be an object of {url, secret?} by name, not 5.'],
    [{ ...GATEWAY, downstreams: { billing: null } }, 'downstreams.billing must be {url, secret?}, not null.'],
    [
      { ...GATEWAY, downstreams: { billing: { url: 'http://127.0.0.1:3/e', secret: 7 } } },
      'downstreams.billing.secret must be a string, not 7.',
    ],
  ])('%j is refused, naming the option', async (options, message) => {
    await expect(startGateway(anyway(options))).rejects.toThrow(message);
  });
});

describe('the clients', () => {
  test.each([
    ['QueueClient', (url: unknown) => new QueueClient(anyway(url))],
    ['ReceiverClient', (url: unknown) => new ReceiverClient(anyway(url))],
    ['GatewayClient', (url: unknown) => new GatewayClient(anyway(url))],
  ])('%s refuses a base URL that is not an http:// URL', (_name, make) => {
    expect(() => make('127.0.0.1:4100')).toThrow(
      'baseUrl must be an absolute http:// URL such as http://127.0.0.1:4100, not "127.0.0.1:4100".',
    );
    expect(() => make('ftp://127.0.0.1:4100')).toThrow(
      'baseUrl must be an http:// URL (the services speak plain HTTP on a private network), not "ftp://127.0.0.1:4100".',
    );
    expect(() => make(undefined)).toThrow(
      'baseUrl must be an absolute http:// URL such as http://127.0.0.1:4100, not undefined.',
    );
  });
});

describe('fencedEffects', () => {
  test('refuses a missing store, a store not yet awaited, and options of the wrong kind', async () => {
    const opening = openSqliteEffectStore({ filename: ':memory:' });
    const store = await opening;
    try {
      expect(() => fencedEffects(anyway(5))).toThrow('fencedEffects takes {store, apply?, secret?, clock?}, not 5.');
      expect(() => fencedEffects(anyway({}))).toThrow(
        'fencedEffects: store must be an effect store (from openSqliteEffectStore, openPostgresEffectStore or createKnexEffectStore), not undefined.',
      );
      expect(() => fencedEffects(anyway({ store: opening }))).toThrow(
        'fencedEffects: store is a promise; await openSqliteEffectStore, openPostgresEffectStore or createKnexEffectStore before passing its store.',
      );
      expect(() => fencedEffects(anyway({ store, clock: {} }))).toThrow(CLOCK);
      expect(() => fencedEffects(anyway({ store, secret: 5 }))).toThrow(
        'fencedEffects: secret must be a string, not 5.',
      );
      expect(() => fencedEffects(anyway({ store, apply: 'x' }))).toThrow(
        'fencedEffects: apply must be a function (effect, tx) => Promise<void>, not "x".',
      );
      expect(typeof fencedEffects({ store })).toBe('function');
    } finally {
      await store.close();
    }
  });
});

// A misspelt option would otherwise be ignored without a word, and the call run on its default.
describe('an option name the call does not take', () => {
  const MEANT = (what: string, given: string, meant: string) =>
    `${what} does not take "${given}" (did you mean ${meant}?)`;

  test('startQueue, startReceiver and startGateway refuse it before anything is opened or listens', async () => {
    const db = join(tempDir('leasehold-options-'), 'queue.sqlite');
    await expect(startQueue(anyway({ db, journl: 'wal' }))).rejects.toThrow(MEANT('startQueue', 'journl', 'journal'));
    expect(existsSync(db)).toBe(false);
    await expect(startReceiver(anyway({ dbPath: ':memory:' }))).rejects.toThrow(
      'startReceiver does not take "dbPath"; its options are firstByteTimeoutMs, headersTimeoutMs, requestTimeoutMs, maxConnections, port, host, db, secret, testMode, clock, logger, journal, retainJournalMs.',
    );
    await expect(startGateway(anyway({ ...GATEWAY, retryAttempt: 5 }))).rejects.toThrow(
      MEANT('startGateway', 'retryAttempt', 'retryAttempts'),
    );
  });

  test('the clients refuse it', () => {
    expect(() => new QueueClient('http://127.0.0.1:1', anyway({ timeout: 5 }))).toThrow(
      new RangeError(
        'QueueClient does not take "timeout" (did you mean timeoutMs?); its options are timeoutMs, agent, apiKey, maxAnswerBytes.',
      ),
    );
    expect(() => new GatewayClient('http://127.0.0.1:1', anyway({ apikey: 'k' }))).toThrow(
      MEANT('GatewayClient', 'apikey', 'apiKey'),
    );
    expect(() => new ReceiverClient('http://127.0.0.1:1', anyway({ apiKey: 'k' }))).toThrow(
      'ReceiverClient does not take "apiKey"; its options are timeoutMs, agent.',
    );
    expect(() => new QueueClient('http://127.0.0.1:1', anyway(5))).toThrow(
      new TypeError('QueueClient takes an object of options, not 5.'),
    );
  });

  test('createWorker, runWorker and run() refuse it', async () => {
    const base = { queueUrl: 'http://127.0.0.1:1', gatewayUrl: 'http://127.0.0.1:2', name: 'w1' };
    expect(() => createWorker(anyway({ ...base, concurency: 8 }))).toThrow(
      MEANT('createWorker', 'concurency', 'concurrency'),
    );
    expect(() => createWorker(anyway(undefined))).toThrow(
      new TypeError('createWorker takes an object of options, not undefined.'),
    );
    // The class itself, made directly, is named as it was called.
    expect(() => new Worker(anyway({ ...base, concurency: 8 }))).toThrow(
      MEANT('new Worker', 'concurency', 'concurrency'),
    );
    await expect(runWorker(anyway({ ...base, handler: () => undefined, maxjobs: 1 }))).rejects.toThrow(
      MEANT('runWorker', 'maxjobs', 'maxJobs'),
    );
    const worker = createWorker(base);
    try {
      await expect(worker.run(() => undefined, anyway({ maxJob: 1 }))).rejects.toThrow(
        'run does not take "maxJob" (did you mean maxJobs?); its options are signal, maxJobs.',
      );
    } finally {
      await worker.close();
    }
  });

  test('the stores and the apps refuse it, and a store opens no file', async () => {
    const db = join(tempDir('leasehold-options-'), 'queue.sqlite');
    await expect(openSqliteQueueStore(anyway({ filename: db, commitWindow: 2 }))).rejects.toThrow(
      MEANT('openSqliteQueueStore', 'commitWindow', 'commitWindowMs'),
    );
    await expect(openSqliteEffectStore(anyway({ filename: db, jornal: 'wal' }))).rejects.toThrow(
      MEANT('openSqliteEffectStore', 'jornal', 'journal'),
    );
    expect(existsSync(db)).toBe(false);
    const store = await openSqliteEffectStore({ filename: ':memory:' });
    try {
      expect(() => createReceiverApp(anyway({ store, testMode: true }))).toThrow(
        'createReceiverApp does not take "testMode"; its options are store, clock, secret, logger, faults, metrics.',
      );
    } finally {
      await store.close();
    }
    expect(() => createQueueApp(anyway({ store: {}, apikey: 'k' }))).toThrow(
      MEANT('createQueueApp', 'apikey', 'apiKey'),
    );
    expect(() => createGatewayApp(anyway({ ...GATEWAY, port: 4200 }))).toThrow(
      'createGatewayApp does not take "port";',
    );
  });

  test('fencedEffects refuses it', async () => {
    const store = await openSqliteEffectStore({ filename: ':memory:' });
    try {
      expect(() => fencedEffects(anyway({ store, applyEffect: async () => undefined }))).toThrow(
        'fencedEffects does not take "applyEffect"; its options are store, clock, secret, apply, logger, metrics.',
      );
    } finally {
      await store.close();
    }
  });

  test('audit and conform refuse it before calling anyone', async () => {
    await expect(
      audit(anyway({ queue: 'http://127.0.0.1:1', receiver: 'http://127.0.0.1:2', pagesize: 10 })),
    ).rejects.toThrow(MEANT('audit', 'pagesize', 'pageSize'));
    await expect(conform(anyway({ url: 'http://127.0.0.1:1/effects', race: 4 }))).rejects.toThrow(
      MEANT('conform', 'race', 'races'),
    );
  });

  test('the building blocks refuse it: ClaimWaiters, FreshAgent, stallHooks, createForwarder', () => {
    expect(() => new ClaimWaiters(anyway({}), anyway({ repoll: 50 }))).toThrow(
      new RangeError(
        'ClaimWaiters does not take "repoll" (did you mean repollMs?); its options are repollMs, maxWaiters.',
      ),
    );
    expect(() => new FreshAgent(anyway({ freshms: 50 }))).toThrow(MEANT('FreshAgent', 'freshms', 'freshMs'));
    const stall = { name: 'w1', stallMs: 10, beforeSend: [1], beforeFinish: [], announce: () => undefined };
    expect(() => stallHooks(anyway({ ...stall, beforeSends: [2] }))).toThrow(
      MEANT('stallHooks', 'beforeSends', 'beforeSend'),
    );
    expect(() => stallHooks(anyway(undefined))).toThrow(
      new TypeError('stallHooks takes an object of options, not undefined.'),
    );
    const endpoint = new URL('http://127.0.0.1:1/effects');
    expect(() => createForwarder(anyway({ endpoint, secret: undefined, now: Date.now, batchng: false }))).toThrow(
      MEANT('createForwarder', 'batchng', 'batching'),
    );
  });

  test('openQueueStore and migrateDownstream refuse it before anything is opened or run', async () => {
    const db = join(tempDir('leasehold-options-'), 'queue.sqlite');
    await expect(openQueueStore(anyway({ db, jounral: 'wal' }))).rejects.toThrow(
      MEANT('openQueueStore', 'jounral', 'journal'),
    );
    expect(existsSync(db)).toBe(false);
    const store = await openSqliteEffectStore({ filename: ':memory:' });
    try {
      let ran = false;
      const migration = { name: '001_shipments', up: async () => (ran = true) };
      await expect(migrateDownstream(store, [migration], anyway({ table: 'x' }))).rejects.toThrow(
        'migrateDownstream does not take "table"; its options are tableName.',
      );
      expect(ran).toBe(false);
      expect(await store.knex.schema.hasTable('downstream_migrations')).toBe(false);
    } finally {
      await store.close();
    }
  });

  // Inside an options object: a misspelt `keys` would leave the audit not checking what was asked.
  test("audit's, startGateway's and startSystem's downstreams refuse it in each entry", async () => {
    await expect(
      audit(
        anyway({
          queue: 'http://127.0.0.1:1',
          receiver: 'http://127.0.0.1:2',
          downstreams: [{ name: 'mailer', url: 'http://127.0.0.1:3/effects', key: ['email'] }],
        }),
      ),
    ).rejects.toThrow(MEANT("audit's downstreams[0]", 'key', 'keys'));
    await expect(
      startGateway(anyway({ ...GATEWAY, downstreams: { billing: { url: 'http://127.0.0.1:3/e', secert: 's' } } })),
    ).rejects.toThrow(MEANT('downstreams.billing', 'secert', 'secret'));
    await expect(
      startSystem(anyway({ downstreams: { mailer: { url: 'http://127.0.0.1:3/effects', secert: 's' } } })),
    ).rejects.toThrow(MEANT("startSystem's downstreams.mailer", 'secert', 'secret'));
  });
});

// `process.env.X` and `cond ? value : undefined` are how options are often given; under
// exactOptionalPropertyTypes an option typed `?: T` would refuse them though the call takes them.
describe('every optional option of the start functions takes undefined as left out', () => {
  test('in its type, under exactOptionalPropertyTypes', () => {
    const source = `
      import { startGateway } from '../../gateway/index.js';
      import { startQueue } from '../../queue/index.js';
      import { startReceiver } from '../../receiver/index.js';
      import { startSystem } from '../../testing/index.js';
      declare const env: Record<string, string | undefined>;
      const limits = {
        firstByteTimeoutMs: undefined, headersTimeoutMs: undefined, requestTimeoutMs: undefined,
        maxConnections: undefined, host: undefined, port: undefined,
      };
      export const q = startQueue({
        ...limits, db: ':memory:', latePolicy: undefined, clock: undefined, logger: undefined, journal: undefined,
        commitWindowMs: undefined, apiKey: env.KEY, testMode: undefined, maxClaimWaiters: undefined,
      });
      export const r = startReceiver({
        ...limits, db: env.DB, secret: undefined, testMode: undefined, clock: undefined, logger: undefined,
        journal: undefined, retainJournalMs: undefined,
      });
      export const g = startGateway({
        ...limits, queueUrl: 'http://127.0.0.1:1', receiverUrl: undefined, receiverSecret: undefined,
        downstreams: undefined, secret: undefined, apiKey: undefined, receiverTimeoutMs: undefined,
        queueTimeoutMs: undefined, retryAttempts: undefined, retryBudgetMs: undefined, backoffBaseMs: undefined,
        backoffMaxMs: undefined, logger: undefined, clock: undefined, random: undefined, metrics: undefined,
      });
      export const s = startSystem({ db: env.DB, clock: undefined, secret: undefined, apiKey: undefined, downstreams: undefined });
    `;
    expect(typeErrors(source, { exactOptionalPropertyTypes: true }, 'platform'), 'type errors').toEqual([]);
  });

  test('at run time: each starts with its defaults', async () => {
    const limits = {
      ...{ firstByteTimeoutMs: undefined, headersTimeoutMs: undefined, requestTimeoutMs: undefined },
      ...{ maxConnections: undefined, host: undefined, port: undefined },
    };
    const queue = await startQueue({
      ...limits,
      db: ':memory:',
      ...{ latePolicy: undefined, clock: undefined, logger: undefined, journal: undefined, commitWindowMs: undefined },
      ...{ apiKey: undefined, testMode: undefined, maxClaimWaiters: undefined },
    });
    const receiver = await startReceiver({
      ...limits,
      ...{ db: undefined, secret: undefined, testMode: undefined, clock: undefined, logger: undefined },
      ...{ journal: undefined, retainJournalMs: undefined },
    });
    const gateway = await startGateway({
      ...limits,
      queueUrl: queue.url,
      receiverUrl: receiver.url,
      ...{ receiverSecret: undefined, downstreams: undefined, secret: undefined, apiKey: undefined },
      ...{ receiverTimeoutMs: undefined, queueTimeoutMs: undefined, retryAttempts: undefined },
      ...{ retryBudgetMs: undefined, backoffBaseMs: undefined, backoffMaxMs: undefined, logger: undefined },
      ...{ clock: undefined, random: undefined, metrics: undefined },
    });
    const system = await startSystem({
      ...{ db: undefined, clock: undefined, secret: undefined, apiKey: undefined, downstreams: undefined },
    });
    try {
      for (const url of [queue.url, receiver.url, gateway.url])
        expect(url, 'on 127.0.0.1, a free port').toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      const client = new QueueClient(queue.url);
      await client.enqueue({ id: 'a', qty: 1 });
      const lease = await client.claim('w1');
      expect(lease?.leaseUntil, 'the default lease').toBeGreaterThan(Date.now() + 20_000);
      client.close();
      expect(system.clock.manual, "the system's clock: real").toBe(false);
      expect(Object.keys(system.downstreams)).toEqual(['receiver']);
    } finally {
      await Promise.all([queue.close(), receiver.close(), gateway.close(), system.close()]);
    }
  });
});
