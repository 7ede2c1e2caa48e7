// The claim's row pick walks the partial indexes and stops after the rows it needs: it never
// reads and sorts every pending job, so a claim costs the same with ten jobs or ten thousand.
import { expect, test } from 'vitest';
import { join } from 'node:path';
import { openSqliteQueueStore } from '../../queue/index.js';
import { pickStatement } from '../../queue/sql/claim.js';
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
