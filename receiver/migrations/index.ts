// The receiver's migrations as a list in code, so they run the same from sources and from
// dist/ (no directory scan). Append-only: never edit or reorder a released migration.
import type { Knex } from 'knex';
import { createEffectsAndJournal } from './001_create_effects_and_journal.js';
import { addPreviousHighestToken } from './002_add_previous_highest_token.js';
import { indexJournalAt } from './003_index_journal_at.js';
import { widenJobId } from './004_job_id_256.js';
import { runningTotals } from './005_running_totals.js';
import { effectKeys } from './006_effect_keys.js';

export interface ReceiverMigration {
  name: string;
  up(knex: Knex): Promise<void>;
  down(knex: Knex): Promise<void>;
}

const migrations: readonly ReceiverMigration[] = [
  createEffectsAndJournal,
  addPreviousHighestToken,
  indexJournalAt,
  widenJobId,
  runningTotals,
  effectKeys,
];

/** Its own bookkeeping table, so the receiver can share a database with the queue. */
export const RECEIVER_MIGRATIONS_TABLE = 'receiver_migrations';

export const receiverMigrationSource: Knex.MigrationSource<ReceiverMigration> = {
  getMigrations: async () => [...migrations],
  getMigrationName: (migration) => migration.name,
  getMigration: async (migration) => migration,
};

/** Brings a database up to the latest receiver schema; safe to run on every start. */
export async function migrateReceiver(knex: Knex): Promise<void> {
  await knex.migrate.latest({ migrationSource: receiverMigrationSource, tableName: RECEIVER_MIGRATIONS_TABLE });
}
