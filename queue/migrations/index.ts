// The queue's migrations, listed in code so they run the same from sources and from dist/.
// Numbered and append-only: never edit one that has shipped, add the next.
import type { Knex } from 'knex';
import * as m001 from './001_jobs.js';
import * as m002 from './002_drop_status_index.js';

const migrations: Record<string, Knex.Migration> = {
  '001_jobs': m001,
  '002_drop_status_index': m002,
};

export const queueMigrations: Knex.MigratorConfig = {
  tableName: 'queue_migrations',
  migrationSource: {
    getMigrations: async () => Object.keys(migrations).sort(),
    getMigrationName: (name: string) => name,
    getMigration: async (name: string) => migrations[name]!,
  },
};
