// The embedder's own tables beside the receiver's: a downstream that mounts fencedEffects keeps
// its effect (a shipments table, say) in the store's database, written through `tx` in `apply`.
// Its migrations run here, in code, with a bookkeeping table of their own.
import type { Knex } from 'knex';
import { migrateSerialised } from '../platform/postgres.js';
import type { KnexEffectStore } from './knex-store.js';
import { checkOptionNames, type OptionNames } from '../platform/option-names.js';

export interface DownstreamMigration {
  /** Unique and stable: it is recorded once run. Migrations run in the order given. */
  name: string;
  up(knex: Knex): Promise<unknown>;
  down?(knex: Knex): Promise<unknown>;
}

export interface MigrateDownstreamOptions {
  /** Where the migrations that ran are recorded (default `downstream_migrations`). */
  tableName?: string;
}

const MIGRATE_DOWNSTREAM_OPTION_NAMES: OptionNames<MigrateDownstreamOptions> = { tableName: true };

/**
 * Runs the migrations not yet run on the store's database, before the app serves. Safe on every
 * start; on PostgreSQL processes starting together migrate one after another.
 */
export async function migrateDownstream(
  store: Pick<KnexEffectStore, 'knex'>,
  migrations: readonly DownstreamMigration[],
  options: MigrateDownstreamOptions = {},
): Promise<void> {
  checkOptionNames('migrateDownstream', options, MIGRATE_DOWNSTREAM_OPTION_NAMES);
  const names = new Set<string>();
  for (const migration of migrations) {
    if (names.has(migration.name)) throw new RangeError(`Two downstream migrations are named "${migration.name}".`);
    names.add(migration.name);
  }
  const { knex } = store;
  const source: Knex.MigrationSource<DownstreamMigration> = {
    getMigrations: async () => [...migrations],
    getMigrationName: (migration) => migration.name,
    getMigration: async (migration) => ({
      up: (k: Knex) => migration.up(k),
      down: (k: Knex) => (migration.down ? migration.down(k) : Promise.resolve()),
    }),
  };
  const migrate = () =>
    knex.migrate.latest({ migrationSource: source, tableName: options.tableName ?? 'downstream_migrations' });
  // knex's own lock table makes a second process fail, not wait; the advisory lock makes it wait.
  if ((knex.client as { dialect?: string }).dialect === 'postgresql') {
    await migrateSerialised(knex, undefined, migrate);
  } else {
    await migrate();
  }
}
