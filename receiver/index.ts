// The receiver's public surface: the stub starter, the app and middleware, the client, the
// store, the rules and the signature scheme. Named exports only.
export { startReceiver, resolveStartOptions, type StartReceiverOptions, type ReceiverHandle } from './service.js';
export { createReceiverApp, type ReceiverAppOptions } from './app.js';
export {
  fencedEffects,
  IDEMPOTENT_REPLAYED_HEADER,
  receiverErrors,
  refusalOf,
  type FencedEffectsOptions,
} from './middleware.js';
export { effectBodySchema, parseEffectBody, parseFencingToken } from './schemas.js';
export { FaultController, faultSchema, type Fault, type FaultRequest } from './faults.js';
export { effectMetrics, type EffectMetrics } from './metrics.js';
export { ReceiverError, RECEIVER_ERROR_STATUS, type ReceiverErrorCode } from './errors.js';
export {
  ReceiverClient,
  type EffectsPage,
  type JournalPage,
  type ReceiverCallOptions,
  type ReceiverClientOptions,
  type RecordOptions,
  type RecordOutcome,
} from './client.js';
export {
  differences,
  effectOf,
  judge,
  sameBody,
  systemClock,
  type Clock,
  type Effect,
  type EffectRequest,
  type JobState,
  type Judgement,
  type Outcome,
} from './rules.js';
export {
  recordEffect,
  type ApplyEffect,
  type EffectStore,
  type JournalEntry,
  type PageQuery,
  type PruneOptions,
  type Recorded,
  type Totals,
} from './store.js';
export { createKnexEffectStore, type KnexEffectStore, type KnexEffectStoreOptions } from './knex-store.js';
export type { EffectDialect } from './dialect.js';
export { openSqliteEffectStore, type SqliteEffectStoreOptions } from './sqlite-store.js';
export { openPostgresEffectStore, postgresEffectDialect, type PostgresEffectStoreOptions } from './postgres-store.js';
export { migrateReceiver, receiverMigrationSource, RECEIVER_MIGRATIONS_TABLE } from './migrations/index.js';
export { migrateDownstream, type DownstreamMigration, type MigrateDownstreamOptions } from './downstream.js';
export {
  signatureHeader,
  verifySignature,
  SIGNATURE_HEADER,
  FENCING_TOKEN_HEADER,
  SIGNATURE_TOLERANCE_MS,
  SIGNATURE_VERSION,
  type SignatureCheck,
  type SignedRequest,
} from './signature.js';
