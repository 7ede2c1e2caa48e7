// The sum of applied quantities kept in one row, written in the transaction that applies each
// effect: GET /totals reads one row instead of summing the table, and an effect whose qty would
// take the sum past 2^53 - 1 is refused there, so the reported sum is always exact.
import type { Knex } from 'knex';
import type { ReceiverMigration } from './index.js';

export const runningTotals: ReceiverMigration = {
  name: '005_running_totals',
  async up(knex: Knex) {
    await knex.schema.createTable('receiver_totals', (table) => {
      table.integer('id').primary();
      table.bigInteger('effects').notNullable();
      table.bigInteger('qty').notNullable();
    });
    await knex.raw(
      `INSERT INTO receiver_totals (id, effects, qty)
       SELECT 1, COUNT(*), COALESCE(SUM(qty), 0) FROM receiver_effects`,
    );
  },
  async down(knex: Knex) {
    await knex.schema.dropTable('receiver_totals');
  },
};
