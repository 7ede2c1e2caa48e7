// One limit for a job id, in code and schema: the API takes ids of up to 256 characters, and
// knex's string() made PostgreSQL columns varchar(255), so a 256-character id failed there. SQLite
// does not enforce a varchar length; widening a varchar is a catalogue change on PostgreSQL.
import type { Knex } from 'knex';
import type { ReceiverMigration } from './index.js';

const isPostgres = (knex: Knex) => knex.client.dialect === 'postgresql';

export const widenJobId: ReceiverMigration = {
  name: '004_job_id_256',
  async up(knex: Knex) {
    if (!isPostgres(knex)) return;
    await knex.raw('ALTER TABLE receiver_effects ALTER COLUMN job_id TYPE varchar(256)');
    await knex.raw('ALTER TABLE receiver_journal ALTER COLUMN job_id TYPE varchar(256)');
  },
  async down(knex: Knex) {
    if (!isPostgres(knex)) return;
    await knex.raw('ALTER TABLE receiver_journal ALTER COLUMN job_id TYPE varchar(255)');
    await knex.raw('ALTER TABLE receiver_effects ALTER COLUMN job_id TYPE varchar(255)');
  },
};
