// The claim's row pick walks the partial indexes and stops after the rows it needs: it never
// reads and sorts every pending job, so a claim costs the same with ten jobs or ten thousand; the
// claim statement around it reaches rows by seq.
// The batched finish reads only its own jobs' rows, by id.
import { expect, test } from 'vitest';
import { join } from 'node:path';
import { openSqliteQueueStore } from '../../queue/index.js';
import { claimStatement, pickStatement } from '../../queue/sql/claim.js';
import { finishManyStatement } from '../../queue/sql/finish-many.js';
import { tempDir } from '../helpers/tmp.js';

test('the claim pick uses queue_jobs_pending and queue_jobs_leased without a sort over the queue', async () => {
  const store = await openSqliteQueueStore({ filename: join(tempDir('leasehold-plan-'), 'q.sqlite') });
  try {
    const pick = pickStatement('sqlite');
    const rows: { detail: string }[] = await store.knex.raw(
      `EXPLAIN QUERY PLAN ${pick.sql}`,
      pick.bind({ now: 0, max: 1 }),
    );
    const lines = rows.map((r) => r.detail);
    const plan = lines.join('\n');
    const pending = lines.findIndex((l) => /SCAN queue_jobs USING (COVERING )?INDEX queue_jobs_pending/.test(l));
    // Pending jobs are read in index order, so their walk stops at the first row: no sort.
    expect(pending, plan).toBeGreaterThanOrEqual(0);
    expect(lines[pending + 1] ?? '', plan).not.toContain('TEMP B-TREE');
    // Expired leases are found by lease_until (only those are sorted, by priority).
    expect(plan).toMatch(/SEARCH queue_jobs USING INDEX queue_jobs_leased \(lease_until<\?\)/);
  } finally {
    await store.close();
  }
});

test('the claim statement reaches its rows by seq, and reads queue_jobs through indexes only', async () => {
  const store = await openSqliteQueueStore({ filename: join(tempDir('leasehold-plan-'), 'q.sqlite') });
  try {
    const claim = claimStatement('sqlite');
    const rows: { detail: string }[] = await store.knex.raw(
      `EXPLAIN QUERY PLAN ${claim.sql}`,
      claim.bind({ now: 0, max: 1, owner: 'w1', leaseMs: 1_000 }),
    );
    const lines = rows.map((r) => r.detail);
    const plan = lines.join('\n');
    expect(lines[0], plan).toMatch(/SEARCH queue_jobs USING INTEGER PRIMARY KEY \(rowid=\?\)/);
    // No walk over the whole table: every access to queue_jobs goes through an index.
    expect(
      lines.filter((l) => /SCAN queue_jobs(?! USING)/.test(l)),
      plan,
    ).toEqual([]);
  } finally {
    await store.close();
  }
});

test('the batched finish walks its batch and finds each job by the id index, never scanning the queue', async () => {
  const store = await openSqliteQueueStore({ filename: join(tempDir('leasehold-plan-'), 'q.sqlite') });
  try {
    const statement = finishManyStatement('sqlite', 'reject');
    const rows: { detail: string }[] = await store.knex.raw(
      `EXPLAIN QUERY PLAN ${statement.sql}`,
      statement.bind({ items: '[]', owner: 'w1', now: 0 }),
    );
    const plan = rows.map((r) => r.detail).join('\n');
    expect(plan).toMatch(/SCAN json_each/);
    expect(plan).toMatch(/SEARCH queue_jobs USING INDEX queue_jobs_id_unique \(id=\?\)/);
    expect(plan).not.toMatch(/SCAN queue_jobs/);
  } finally {
    await store.close();
  }
});
