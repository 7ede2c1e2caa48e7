// The first schema: one row per job (its effect and highest token) and the append-only journal.
import type { Knex } from 'knex';
import type { ReceiverMigration } from './index.js';

export const createEffectsAndJournal: ReceiverMigration = {
  name: '001_create_effects_and_journal',
  async up(knex: Knex) {
    // bigInteger everywhere: tokens and epoch-ms times go up to 2^53 - 1, past a 32-bit integer.
    await knex.schema.createTable('receiver_effects', (table) => {
      table.string('job_id').primary();
      table.bigInteger('qty').notNullable();
      table.bigInteger('token').notNullable();
      table.bigInteger('applied_at').notNullable();
      table.bigInteger('highest_token').notNullable();
    });
    await knex.schema.createTable('receiver_journal', (table) => {
      table.bigIncrements('seq').primary();
      table.string('job_id').notNullable();
      table.bigInteger('qty').notNullable();
      table.bigInteger('token').notNullable();
      table.string('outcome').notNullable();
      table.bigInteger('at').notNullable();
    });
  },
  async down(knex: Knex) {
    await knex.schema.dropTable('receiver_journal');
    await knex.schema.dropTable('receiver_effects');
  },
};
