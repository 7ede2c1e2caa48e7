// The highest token a duplicate replaced, written by the same statement that raises it: the
// recording write's returned row then tells an insert (NULL) from an update, and gives the state
// the duplicate was judged against, without a read before the write.
import type { Knex } from 'knex';
import type { ReceiverMigration } from './index.js';

export const addPreviousHighestToken: ReceiverMigration = {
  name: '002_add_previous_highest_token',
  async up(knex: Knex) {
    await knex.schema.alterTable('receiver_effects', (table) => {
      table.bigInteger('previous_highest_token').nullable();
    });
  },
  async down(knex: Knex) {
    await knex.schema.alterTable('receiver_effects', (table) => {
      table.dropColumn('previous_highest_token');
    });
  },
};
