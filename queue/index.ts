// The queue's public surface: rules, store, service, client.
export type {
  Clock,
  CurrentLease,
  DeadReason,
  Job,
  JobPage,
  JobStatus,
  JobSummary,
  LateFinishPolicy,
  Lease,
  NewJob,
  Presented,
  RetryInput,
  StaleReason,
  Stats,
} from './types.js';
export { systemClock } from './types.js';
export {
  DEFAULT_LEASE_MS,
  DEFAULT_MAX_ATTEMPTS,
  claimDisposition,
  deadlinePassed,
  defaultRetryInMs,
  leaseUntilFor,
  leaseValid,
  staleReason,
} from './rules.js';
export { QueueError, QUEUE_ERROR_STATUS, type QueueErrorCode } from './errors.js';
export type { QueueStore, ListQuery } from './store.js';
export { openSqliteQueueStore, type SqliteQueueOptions } from './sqlite-store.js';
export { openPostgresQueueStore, type PostgresQueueOptions } from './postgres-store.js';
export { createQueueApp, type QueueApp, type QueueAppOptions } from './app.js';
export { ClaimWaiters, type LongPollOptions } from './long-poll.js';
export { startQueue, openQueueStore, type QueueService, type QueueServiceOptions } from './service.js';
export {
  QueueClient,
  type CallOptions,
  type CancelInput,
  type EnqueueInput,
  type QueueClientOptions,
  type ReleaseInput,
} from './client.js';
