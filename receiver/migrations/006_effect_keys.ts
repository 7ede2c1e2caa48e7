// Several effects per job: an effect is identified by (job_id, effect_key), the default effect
// under the key '' (a real key is never empty), with an optional qty and body; the job's highest
// token moves to a row of its own in receiver_jobs, since the fence is per job across its keys.
// The journal records each request's key and body, and a qty only when one was given.
//
// PostgreSQL alters the tables in place. SQLite cannot drop a NOT NULL or change a primary key,
// so it rebuilds both tables: create, copy, drop, rename, as SQLite's documentation lays out;
// the journal keeps its AUTOINCREMENT counter, so a seq is never reused, even after a reset.
import type { Knex } from 'knex';
import type { ReceiverMigration } from './index.js';

const isPostgres = (knex: Knex) => knex.client.dialect === 'postgresql';

async function createJobs(knex: Knex): Promise<void> {
  await knex.schema.createTable('receiver_jobs', (table) => {
    table.string('job_id', 256).primary();
    table.bigInteger('highest_token').notNullable();
    // Set only by the write that raises the highest token, to the value it replaces: NULL in the
    // returned row means that write inserted the job.
    table.bigInteger('previous_highest_token').nullable();
  });
  await knex.raw(
    'INSERT INTO receiver_jobs (job_id, highest_token) SELECT job_id, highest_token FROM receiver_effects',
  );
}

async function upPostgres(knex: Knex): Promise<void> {
  await createJobs(knex);
  await knex.raw(`ALTER TABLE receiver_effects
    ADD COLUMN effect_key varchar(128) NOT NULL DEFAULT '',
    ADD COLUMN body text,
    ADD COLUMN duplicate_token bigint,
    ALTER COLUMN qty DROP NOT NULL,
    DROP COLUMN highest_token,
    DROP COLUMN previous_highest_token,
    DROP CONSTRAINT receiver_effects_pkey,
    ADD PRIMARY KEY (job_id, effect_key)`);
  await knex.raw(`ALTER TABLE receiver_journal
    ADD COLUMN effect_key varchar(128),
    ADD COLUMN body text,
    ALTER COLUMN qty DROP NOT NULL`);
}

async function upSqlite(knex: Knex): Promise<void> {
  await createJobs(knex);
  await knex.raw(`CREATE TABLE receiver_effects_keyed (
    job_id varchar(256) NOT NULL,
    effect_key varchar(128) NOT NULL DEFAULT '',
    qty bigint,
    body text,
    token bigint NOT NULL,
    applied_at bigint NOT NULL,
    duplicate_token bigint,
    PRIMARY KEY (job_id, effect_key))`);
  await knex.raw(`INSERT INTO receiver_effects_keyed (job_id, qty, token, applied_at)
    SELECT job_id, qty, token, applied_at FROM receiver_effects`);
  await knex.raw('DROP TABLE receiver_effects');
  await knex.raw('ALTER TABLE receiver_effects_keyed RENAME TO receiver_effects');

  await knex.raw(`CREATE TABLE receiver_journal_keyed (
    seq integer NOT NULL PRIMARY KEY AUTOINCREMENT,
    job_id varchar(256) NOT NULL,
    effect_key varchar(128),
    qty bigint,
    body text,
    token bigint NOT NULL,
    outcome varchar(255) NOT NULL,
    at bigint NOT NULL)`);
  await knex.raw(`INSERT INTO receiver_journal_keyed (seq, job_id, qty, token, outcome, at)
    SELECT seq, job_id, qty, token, outcome, at FROM receiver_journal`);
  // The counter, not the rows' highest seq: entries deleted by a reset or a prune keep their seq.
  await knex.raw(`DELETE FROM sqlite_sequence WHERE name = 'receiver_journal_keyed'`);
  await knex.raw(`INSERT INTO sqlite_sequence (name, seq)
    SELECT 'receiver_journal_keyed', seq FROM sqlite_sequence WHERE name = 'receiver_journal'`);
  await knex.raw('DROP TABLE receiver_journal');
  await knex.raw('ALTER TABLE receiver_journal_keyed RENAME TO receiver_journal');
  await knex.raw('CREATE INDEX receiver_journal_at ON receiver_journal (at)');
}

export const effectKeys: ReceiverMigration = {
  name: '006_effect_keys',
  async up(knex: Knex) {
    await (isPostgres(knex) ? upPostgres(knex) : upSqlite(knex));
  },
  async down() {
    // Keyed effects and bodies have no place in the schema before this one.
    throw new Error('006_effect_keys cannot be undone: the effects of a job beyond its default one would be lost.');
  },
};
