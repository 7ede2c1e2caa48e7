// The jobs table. Times are epoch milliseconds; payload and result are JSON text so the
// same schema serves SQLite and PostgreSQL.
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('queue_jobs', (t) => {
    t.bigIncrements('seq').primary(); // enqueue order, the last tie-breaker of a claim
    t.text('id').notNullable().unique();
    t.bigInteger('qty').notNullable();
    t.text('payload');
    t.text('status').notNullable();
    t.text('owner');
    t.bigInteger('token').notNullable().defaultTo(0);
    t.integer('attempts').notNullable().defaultTo(0);
    t.integer('max_attempts').notNullable();
    t.integer('priority').notNullable().defaultTo(0);
    t.bigInteger('lease_ms');
    t.bigInteger('lease_until');
    t.bigInteger('deadline');
    t.bigInteger('run_at').notNullable();
    t.text('result');
    t.text('last_error');
    t.text('dead_reason');
    t.text('request').notNullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('updated_at').notNullable();
  });
  // A claim walks pending jobs in (priority desc, run_at, seq) order and stops at the first.
  await knex.raw(`CREATE INDEX queue_jobs_pending ON queue_jobs (priority DESC, run_at, seq) WHERE status = 'pending'`);
  // Expired leases are found by lease_until.
  await knex.raw(`CREATE INDEX queue_jobs_leased ON queue_jobs (lease_until) WHERE status = 'leased'`);
  // The quarantine sweep looks for live jobs whose deadline has passed.
  await knex.raw(
    `CREATE INDEX queue_jobs_deadline ON queue_jobs (deadline) WHERE status IN ('pending', 'leased') AND deadline IS NOT NULL`,
  );
  await knex.raw(`CREATE INDEX queue_jobs_status ON queue_jobs (status)`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('queue_jobs');
}
