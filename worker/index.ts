// The worker's public surface: run jobs under fenced leases, renewed while the handler works.
export {
  createWorker,
  runWorker,
  Worker,
  type RunOptions,
  type RunWorkerOptions,
  type WorkerSummary,
} from './worker.js';
export {
  WORKER_DEFAULTS,
  MIN_LEASE_MS,
  resolveWorkerOptions,
  type ResolvedWorkerOptions,
  type WorkerOptions,
} from './options.js';
export { LeaseLostError, type LeaseLostDetails, type LossDuring, type LossReason } from './errors.js';
export { estimateLeaseEnd, heartbeatIntervalMs, refusalOf, type Refusal } from './rules.js';
export type { StalledEvent, WorkerEvent, WorkerEventBody, WorkerEventName, WorkerLine } from './events.js';
export type {
  ClaimedLease,
  EffectSender,
  Handler,
  JobContext,
  JobOutcome,
  QueueApi,
  SendOutcome,
  WorkerHooks,
} from './types.js';
