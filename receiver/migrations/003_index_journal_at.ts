// The journal by time, so pruning old entries (`--retain-journal`) walks only the entries it
// deletes, in small batches, instead of scanning the whole journal while holding the write lock.
import type { Knex } from 'knex';
import type { ReceiverMigration } from './index.js';

export const indexJournalAt: ReceiverMigration = {
  name: '003_index_journal_at',
  async up(knex: Knex) {
    await knex.schema.alterTable('receiver_journal', (table) => {
      table.index(['at'], 'receiver_journal_at');
    });
  },
  async down(knex: Knex) {
    await knex.schema.alterTable('receiver_journal', (table) => {
      table.dropIndex(['at'], 'receiver_journal_at');
    });
  },
};
