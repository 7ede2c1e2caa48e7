// The store conformance suite on real SQLite files, in the rollback journal and in WAL (where
// lease checks read on a connection of their own).
import { afterEach } from 'vitest';
import { join } from 'node:path';
import type { SqliteJournal } from '../../platform/sqlite.js';
import { openSqliteQueueStore, type QueueStore } from '../../queue/index.js';
import { tempDir } from '../helpers/tmp.js';
import { finishManySuite } from './store-finish-many.suite.js';
import { queueStoreSuite, type StoreFactory } from './store.suite.js';

const open: QueueStore[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((s) => s.close()));
});

const factoryFor =
  (journal: SqliteJournal): StoreFactory =>
  async ({ clock, latePolicy }) => {
    const filename = join(tempDir('leasehold-store-'), 'queue.sqlite');
    const openOne = async () => {
      const store = await openSqliteQueueStore({ filename, clock, latePolicy, busyTimeoutMs: 200, journal });
      open.push(store);
      return store;
    };
    return { store: await openOne(), clock, openAnother: openOne };
  };

queueStoreSuite('sqlite', factoryFor('delete'));
finishManySuite('sqlite', factoryFor('delete'));
queueStoreSuite('sqlite, WAL', factoryFor('wal'));
finishManySuite('sqlite, WAL', factoryFor('wal'));
