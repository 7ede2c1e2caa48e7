// Each lease rule is written twice, once as a pure function (queue/rules.ts) and once as the SQL
// that enforces it (queue/sql/): these tests hold the two equal over a table of cases, on SQLite
// and on PostgreSQL. The lease guard, alone and in the batched finish's UPDATE, against
// rules.staleReason; the quarantine predicate, the claim's pick (which leaves out what the claim
// makes dead) and the claim statement itself against rules.claimDisposition, on PostgreSQL also
// with the statement reading the server's clock.
import { afterEach, describe, expect, test } from 'vitest';
import { join } from 'node:path';
import type { Knex } from 'knex';
import { named } from '../../platform/named-sql.js';
import { rowsOf } from '../../platform/sql.js';
import { openPostgresQueueStore, openSqliteQueueStore } from '../../queue/index.js';
import type { KnexQueueStore } from '../../queue/knex-store.js';
import { claimDisposition, staleReason } from '../../queue/rules.js';
import { rowToJob } from '../../queue/rows.js';
import { claimManyIn, pickStatement } from '../../queue/sql/claim.js';
import type { SqlDialect } from '../../queue/sql/dialects.js';
import { finishManyStatement } from '../../queue/sql/finish-many.js';
import { JOB_COLUMNS } from '../../queue/sql/get.js';
import { guardParams, leaseGuard } from '../../queue/sql/guard.js';
import { QUARANTINABLE } from '../../queue/sql/quarantine.js';
import type { Job, JobStatus, LateFinishPolicy } from '../../queue/types.js';
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

/**
 * Every row a claim at `now` wrote or left, against rules.claimDisposition of the row before:
 * `dead` with the rule's reason, `claim` leased to `claimer` with the next token and attempt, the
 * lease ending at `now + 1000` or the deadline, and `skip` unchanged. The disagreements, described.
 */
function outcomes(before: Job[], after: Job[], now: number): string[] {
  const found = new Map(after.map((job) => [job.id, job]));
  const wrong: string[] = [];
  for (const job of before) {
    const written = found.get(job.id)!;
    const rule = claimDisposition(job, now);
    const expected: Job =
      rule.kind === 'dead'
        ? { ...job, status: 'dead', deadReason: rule.reason, leaseUntil: null, updatedAt: now }
        : rule.kind === 'claim'
          ? {
              ...job,
              status: 'leased',
              owner: 'claimer',
              token: job.token + 1,
              attempts: job.attempts + 1,
              leaseMs: 1_000,
              leaseUntil: job.deadline !== null && job.deadline < now + 1_000 ? job.deadline : now + 1_000,
              updatedAt: now,
            }
          : job;
    if (JSON.stringify(written) !== JSON.stringify(expected)) {
      const { status, attempts, maxAttempts, leaseUntil, deadline, runAt } = job;
      const was = { status, attempts, maxAttempts, leaseUntil, deadline, runAt };
      wrong.push(
        `${JSON.stringify(was)} at ${now}: rule ${rule.kind}, expected ${JSON.stringify(expected)}, got ${JSON.stringify(written)}`,
      );
    }
  }
  return wrong;
}

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

    test('the quarantine predicate, the pick and the claim statement take exactly what rules.claimDisposition says', async () => {
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
      const seqs = rowsOf(await knex.raw(pick.sql, pick.bind({ now: NOW, max: 1_000 }))).map((row) => Number(row.seq));
      const picked = ids(rowsOf(await knex('queue_jobs').select('id').whereIn('seq', seqs)));
      // PostgreSQL's pick leaves out what its claim makes dead; SQLite's runs after the sweep.
      if (dialect === 'postgres') expect(picked, 'picked').toEqual(byRule('claim'));
      // The claim itself (on SQLite its sweep too): the dead made dead, the claimable leased, nothing else.
      const leases = await knex.transaction((trx) => claimManyIn(trx, dialect, 'claimer', 1_000, 1_000, NOW));
      const after = rowsOf(await knex.raw(`SELECT ${JOB_COLUMNS} FROM queue_jobs`)).map(rowToJob);
      expect(outcomes(jobs, after, NOW), `${jobs.length} rows, now ${NOW}`).toEqual([]);
      expect(leases.map((lease) => lease.id).sort(), 'leases answered').toEqual(byRule('claim'));
    });
  });
}

describe("the claim on PostgreSQL's server clock, read by the statement itself", () => {
  // The statement's instant cannot be chosen, so rows are laid out one millisecond apart around
  // it: whichever instant it reads, rows sit just before, at and just after it, for each rule.
  test('at that instant, quarantine before claim exactly as rules.claimDisposition says, at every boundary', async () => {
    const store = await openPostgresQueueStore({ connectionString: testSchema('lh_rules').url });
    stores.push(store);
    const { knex } = store;
    const span = 3_000;
    const t0 = Number(
      rowsOf(await knex.raw('SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now'))[0]!.now,
    );
    const kinds = [
      // pending, by deadline (rule 4) and by runAt
      `'pending', NULL::bigint, 4, t, 0`,
      `'pending', NULL::bigint, 4, NULL::bigint, t`,
      // leased, by the lease's end: attempts spent (rule 5) or not, and a lease that ends at the deadline
      `'leased', t, 5, NULL::bigint, 0`,
      `'leased', t, 4, NULL::bigint, 0`,
      `'leased', t, 4, t, 0`,
    ];
    for (const [k, kind] of kinds.entries())
      await knex.raw(
        `INSERT INTO queue_jobs (id, qty, status, lease_until, attempts, deadline, run_at, owner, token, max_attempts,
           priority, lease_ms, request, created_at, updated_at)
         SELECT 'k${k}-' || (t - ?), 1, ${kind}, CASE WHEN ${k} >= 2 THEN 'w1' END, 1, 5, 0, 1000, '{}', 0, 0
         FROM generate_series(?::bigint, ?::bigint) AS t`,
        [t0, t0, t0 + span - 1],
      );
    const before = rowsOf(await knex.raw(`SELECT ${JOB_COLUMNS} FROM queue_jobs`)).map(rowToJob);
    const leases = await store.claimMany('claimer', 1_000, 2 * kinds.length * span);
    const after = rowsOf(await knex.raw(`SELECT ${JOB_COLUMNS} FROM queue_jobs`)).map(rowToJob);
    const instants = [...new Set(after.filter((job) => job.updatedAt !== 0).map((job) => job.updatedAt))];
    expect(instants.length, `the instants the claim wrote: ${instants.join(', ')}`).toBe(1);
    const now = instants[0]!;
    expect(
      { now, inside: now > t0 && now < t0 + span - 1 },
      `the statement's instant lies inside the rows laid out from ${t0}`,
    ).toEqual({ now, inside: true });
    expect(outcomes(before, after, now), `${before.length} rows, the statement's now ${now}`).toEqual([]);
    const claimable = before.filter((job) => claimDisposition(job, now).kind === 'claim').map((job) => job.id);
    expect(leases.map((lease) => lease.id).sort(), 'leases answered').toEqual(claimable.sort());
  });
});
