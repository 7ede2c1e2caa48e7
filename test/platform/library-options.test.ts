// The library's entry points refuse an option of the wrong kind where it is given, naming it,
// before anything is opened or listens: a JavaScript caller has no types to catch it, and the
// mistake would otherwise surface later, far from its cause (a clock without now() as a 500 on
// every request, a port given as a string as a Unix socket of that name in the working folder).
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { GatewayClient, startGateway } from '../../gateway/index.js';
import { QueueClient, startQueue } from '../../queue/index.js';
import { fencedEffects, openSqliteEffectStore, ReceiverClient, startReceiver } from '../../receiver/index.js';
import { tempDir } from '../helpers/tmp.js';

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
