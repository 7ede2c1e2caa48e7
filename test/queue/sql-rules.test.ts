// Each lease rule is written twice, once as a pure function (queue/rules.ts) and once as the SQL
// that enforces it (queue/sql/): these tests hold the two equal over a table of cases, on SQLite
// and on PostgreSQL. The lease guard, alone and in the batched finish's UPDATE, against
// rules.staleReason; the quarantine predicate and the
// claim pick (PostgreSQL's pick leaves out what the sweep would make dead) against
// rules.claimDisposition.
import { afterEach, describe, expect, test } from 'vitest';
import { join } from 'node:path';
import type { Knex } from 'knex';
import { named } from '../../platform/named-sql.js';
import { rowsOf } from '../../platform/sql.js';
import { openPostgresQueueStore, openSqliteQueueStore } from '../../queue/index.js';
import type { KnexQueueStore } from '../../queue/knex-store.js';
import { claimDisposition, staleReason } from '../../queue/rules.js';
import { rowToJob } from '../../queue/rows.js';
import { pickStatement } from '../../queue/sql/claim.js';
import type { SqlDialect } from '../../queue/sql/dialects.js';
import { finishManyStatement } from '../../queue/sql/finish-many.js';
import { JOB_COLUMNS } from '../../queue/sql/get.js';
import { guardParams, leaseGuard } from '../../queue/sql/guard.js';
import { QUARANTINABLE, quarantineIn } from '../../queue/sql/quarantine.js';
import type { JobStatus, LateFinishPolicy } from '../../queue/types.js';
import { testSchema } from '../helpers/postgres.js';
import { tempDir } from '../helpers/tmp.js';

const NOW = 10_000;
const STATUSES: JobStatus[] = ['pending', 'leased', 'done', 'dead'];
const AROUND = [null, NOW - 1, NOW, NOW + 1];

interface Case {
  id: string;
  status: JobStatus;
  owner: string | null;
  token: number;
  attempts: number;
  max_attempts: number;
  lease_until: number | null;
  deadline: number | null;
  run_at: number;
}

const stores: KnexQueueStore[] = [];
afterEach(async () => {
  await Promise.all(stores.splice(0).map((s) => s.close()));
});

async function open(dialect: SqlDialect): Promise<Knex> {
  const store =
    dialect === 'sqlite'
      ? await openSqliteQueueStore({ filename: join(tempDir('leasehold-sql-rules-'), 'q.sqlite') })
      : await openPostgresQueueStore({ connectionString: testSchema('lh_rules').url, clock: { now: () => NOW } });
  stores.push(store);
  return store.knex;
}

async function insert(knex: Knex, cases: Case[]): Promise<void> {
  const rows = cases.map((c) => ({
    ...c,
    qty: 1,
    priority: 0,
    lease_ms: 1_000,
    request: '{}',
    created_at: 0,
    updated_at: 0,
  }));
  for (let i = 0; i < rows.length; i += 100) await knex('queue_jobs').insert(rows.slice(i, i + 100));
}

/** Every combination of the row's fields the guard looks at, for a holder presenting w1 / 3. */
function guardCases(): Case[] {
  const cases: Case[] = [];
  for (const status of STATUSES)
    for (const owner of ['w1', 'w2'])
      for (const token of [3, 4])
        for (const deadline of AROUND)
          for (const leaseUntil of AROUND)
            cases.push({
              id: `g-${cases.length}`,
              status,
              owner,
              token,
              attempts: 1,
              max_attempts: 5,
              lease_until: leaseUntil,
              deadline,
              run_at: 0,
            });
  return cases;
}

/**
 * Rows a queue can hold, by the rules: a lease never outlives the deadline, so a leased row's
 * `lease_until` is at most its deadline; attempts below or at the budget.
 */
function claimCases(): Case[] {
  const cases: Case[] = [];
  for (const status of STATUSES)
    for (const deadline of AROUND)
      for (const leaseUntil of status === 'leased' ? [NOW - 1, NOW, NOW + 1] : [null])
        for (const runAt of [NOW - 1, NOW, NOW + 1])
          for (const attempts of [4, 5]) {
            if (leaseUntil !== null && deadline !== null && leaseUntil > deadline) continue;
            cases.push({
              id: `c-${cases.length}`,
              status,
              owner: status === 'leased' ? 'w1' : null,
              token: 1,
              attempts,
              max_attempts: 5,
              lease_until: leaseUntil,
              deadline,
              run_at: runAt,
            });
          }
  return cases;
}

const ids = (rows: Array<Record<string, unknown>>) => rows.map((row) => String(row.id)).sort();

for (const dialect of ['sqlite', 'postgres'] as const) {
  describe(`the SQL of the lease rules on ${dialect}`, () => {
    test('the lease guard takes exactly the rows rules.staleReason finds current, under both policies', async () => {
      const knex = await open(dialect);
      const cases = guardCases();
      await insert(knex, cases);
      const jobs = rowsOf(await knex.raw(`SELECT ${JOB_COLUMNS} FROM queue_jobs`)).map(rowToJob);
      const presented = { owner: 'w1', token: 3 };
      const disagreements: string[] = [];
      for (const policy of ['reject', 'if-unclaimed'] as LateFinishPolicy[]) {
        const guard = named(`SELECT id FROM queue_jobs WHERE ${leaseGuard(policy)}`);
        for (const job of jobs) {
          const taken = rowsOf(await knex.raw(guard.sql, guard.bind(guardParams(job.id, presented, NOW)))).length === 1;
          const current = staleReason(job, presented, NOW, policy) === null;
          if (taken !== current) {
            const { status, owner, token, leaseUntil, deadline } = job;
            disagreements.push(
              `${policy} ${JSON.stringify({ status, owner, token, leaseUntil, deadline })}: SQL ${taken}, rule ${current}`,
            );
          }
        }
      }
      expect(disagreements, `${jobs.length} rows, now ${NOW}`).toEqual([]);
    });

    test('the batched finish takes exactly the rows rules.staleReason finds current, under both policies', async () => {
      const knex = await open(dialect);
      const disagreements: string[] = [];
      let judged = 0;
      for (const policy of ['reject', 'if-unclaimed'] as LateFinishPolicy[]) {
        // Rows of their own for each policy: the statement writes the rows it takes.
        const cases = guardCases().map((c) => ({ ...c, id: `${policy}-${c.id}` }));
        await insert(knex, cases);
        const jobs = rowsOf(
          await knex.raw(`SELECT ${JOB_COLUMNS} FROM queue_jobs WHERE id IN (${cases.map(() => '?').join(', ')})`, [
            ...cases.map((c) => c.id),
          ]),
        ).map(rowToJob);
        judged += jobs.length;
        const statement = finishManyStatement(dialect, policy);
        const items = JSON.stringify(jobs.map((job) => ({ id: job.id, token: 3, result: null })));
        const taken = new Set(
          rowsOf(await knex.raw(statement.sql, statement.bind({ items, owner: 'w1', now: NOW }))).map((row) =>
            String(row.id),
          ),
        );
        for (const job of jobs) {
          const current = staleReason(job, { owner: 'w1', token: 3 }, NOW, policy) === null;
          if (taken.has(job.id) !== current) {
            const { status, owner, token, leaseUntil, deadline } = job;
            disagreements.push(
              `${policy} ${JSON.stringify({ status, owner, token, leaseUntil, deadline })}: SQL ${taken.has(job.id)}, rule ${current}`,
            );
          }
        }
      }
      expect(disagreements, `${judged} rows in one statement per policy, now ${NOW}`).toEqual([]);
    });

    test('quarantine, sweep and pick take exactly what rules.claimDisposition says', async () => {
      const knex = await open(dialect);
      const cases = claimCases();
      await insert(knex, cases);
      const jobs = rowsOf(await knex.raw(`SELECT ${JOB_COLUMNS} FROM queue_jobs`)).map(rowToJob);
      const byRule = (kind: string) =>
        jobs
          .filter((job) => claimDisposition(job, NOW).kind === kind)
          .map((job) => job.id)
          .sort();
      const quarantinable = named<{ now: number }>(`SELECT id FROM queue_jobs WHERE ${QUARANTINABLE}`);
      expect(ids(rowsOf(await knex.raw(quarantinable.sql, quarantinable.bind({ now: NOW })))), 'quarantinable').toEqual(
        byRule('dead'),
      );
      const pick = pickStatement(dialect);
      const picked = async () => {
        const seqs = rowsOf(await knex.raw(pick.sql, pick.bind({ now: NOW, max: 1_000 }))).map((row) =>
          Number(row.seq),
        );
        return ids(rowsOf(await knex('queue_jobs').select('id').whereIn('seq', seqs)));
      };
      // PostgreSQL's sweep skips locked rows, so its pick must itself leave out what the sweep
      // would make dead; SQLite's pick relies on the sweep having run under the write lock.
      if (dialect === 'postgres') expect(await picked(), 'picked before the sweep').toEqual(byRule('claim'));
      await knex.transaction((trx) => quarantineIn(trx, dialect, NOW));
      const dead = ids(await knex('queue_jobs').select('id').whereIn('id', byRule('dead')).where('status', 'dead'));
      expect(dead, 'made dead by the sweep').toEqual(byRule('dead'));
      expect(await picked(), 'picked after the sweep').toEqual(byRule('claim'));
    });
  });
}
