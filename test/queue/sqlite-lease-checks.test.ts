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
import { holdWrite } from '../helpers/sqlite-lock.js';
import { tempDir } from '../helpers/tmp.js';
import { newJobInput } from './store.suite.js';

async function withWriteOpen(journal: SqliteJournal) {
  const db = openSqlite({ filename: join(tempDir('leasehold-lease-checks-'), 'queue.sqlite'), journal });
  const store = await KnexQueueStore.open(db.knex, sqliteDialect(db, systemClock, 5_000));
  onTestFinished(() => store.close());
  await store.enqueue(newJobInput({ id: 'job-1', qty: 3 }));
  const lease = (await store.claim('worker-a', 60_000))!;
  const write = await holdWrite(db, (executor) =>
    executor.raw(`UPDATE queue_jobs SET priority = 7 WHERE id = 'job-1'`, []),
  );
  // Ended before the store closes (cleanups run last first), whatever the test found.
  onTestFinished(() => write.end());
  let checked: Lease | undefined;
  const check = store.verify('job-1', { owner: 'worker-a', token: lease.token }).then((answer) => (checked = answer));
  return { store, lease, write, check, checked: () => checked };
}

describe('a lease check while a write transaction is open', () => {
  test('in WAL answers before the COMMIT, with the job as committed before it', async () => {
    const run = await withWriteOpen('wal');
    const answer = await Promise.race([run.check, sleep(3_000).then(() => 'no answer within 3 s')]);
    expect(run.write.committed(), 'the write transaction was still open when the check answered').toBe(false);
    expect(answer).toMatchObject({ id: 'job-1', owner: 'worker-a', token: run.lease.token });
    await run.write.end();
    expect((await run.store.get('job-1'))?.priority, 'the write committed once ended').toBe(7);
  });

  test('in the rollback journal waits for the COMMIT, then answers', async () => {
    const run = await withWriteOpen('delete');
    await sleep(300);
    expect(run.checked(), 'the check answered while the write held the connection').toBeUndefined();
    await run.write.end();
    expect(await run.check).toMatchObject({ id: 'job-1', token: run.lease.token });
  });
});
