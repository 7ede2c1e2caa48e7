// Lease checks on a SQLite queue while a write transaction is open on the store's connection (a
// batch of finishes waiting for its fsync, say): in WAL the check reads on a connection of its
// own and answers at once, with what committed; in the rollback journal it waits its turn.
import { describe, expect, onTestFinished, test } from 'vitest';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { openSqlite, type SqliteJournal } from '../../platform/sqlite.js';
import { KnexQueueStore } from '../../queue/knex-store.js';
import { sqliteDialect } from '../../queue/sqlite-store.js';
import { systemClock, type Lease } from '../../queue/types.js';
import { tempDir } from '../helpers/tmp.js';
import { newJobInput } from './store.suite.js';

async function withWriteOpen(journal: SqliteJournal) {
  const db = openSqlite({ filename: join(tempDir('leasehold-lease-checks-'), 'queue.sqlite'), journal });
  const store = await KnexQueueStore.open(db.knex, sqliteDialect(db, systemClock, 5_000));
  await store.enqueue(newJobInput({ id: 'job-1', qty: 3 }));
  const lease = (await store.claim('worker-a', 60_000))!;
  let end!: () => void;
  const gate = new Promise<void>((resolve) => (end = resolve));
  let opened!: () => void;
  const isOpen = new Promise<void>((resolve) => (opened = resolve));
  let committed = false;
  const write = db
    .write(async (executor) => {
      await executor.raw(`UPDATE queue_jobs SET priority = 7 WHERE id = 'job-1'`, []);
      opened();
      await gate;
    })
    .then(() => (committed = true));
  // Ended whatever the test found, so that closing the store does not wait on it.
  onTestFinished(async () => {
    end();
    await write;
    await store.close();
  });
  await isOpen;
  let checked: Lease | undefined;
  const check = store.verify('job-1', { owner: 'worker-a', token: lease.token }).then((answer) => (checked = answer));
  return { store, lease, end, write, check, committed: () => committed, checked: () => checked };
}

describe('a lease check while a write transaction is open', () => {
  test('in WAL answers before the COMMIT, with the job as committed before it', async () => {
    const run = await withWriteOpen('wal');
    const answer = await Promise.race([run.check, sleep(3_000).then(() => 'no answer within 3 s')]);
    expect(run.committed(), 'the write transaction was still open when the check answered').toBe(false);
    expect(answer).toMatchObject({ id: 'job-1', owner: 'worker-a', token: run.lease.token });
    run.end();
    await run.write;
    expect((await run.store.get('job-1'))?.priority, 'the write committed once ended').toBe(7);
  });

  test('in the rollback journal waits for the COMMIT, then answers', async () => {
    const run = await withWriteOpen('delete');
    await sleep(300);
    expect(run.checked(), 'the check answered while the write held the connection').toBeUndefined();
    run.end();
    await run.write;
    expect(await run.check).toMatchObject({ id: 'job-1', token: run.lease.token });
  });
});
