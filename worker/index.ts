// The worker's public surface: run jobs under fenced leases, renewed while the handler works, several
// at once; stop by releasing; keep each generation's output apart.
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
  MAX_CONCURRENCY,
  MIN_LEASE_MS,
  resolveWorkerOptions,
  type ResolvedWorkerOptions,
  type WorkerOptions,
} from './options.js';
export { LeaseLostError, LOSS_WORDS, type LeaseLostDetails, type LossDuring, type LossReason } from './errors.js';
export {
  claimSize,
  connectionIsFresh,
  estimateLeaseEnd,
  generationPath,
  heartbeatIntervalMs,
  jobFolderName,
  mayBeCancelled,
  orphanGenerations,
  recordedOutput,
  refusalOf,
  releasedEarlierBy,
  resultWithOutput,
  withDeadReason,
  type Refusal,
} from './rules.js';
export { cleanupOrphans, outputDir, type Cleanup } from './outputs.js';
export { stallHooks, type StallOptions, type Stalls } from './stalls.js';
export { FRESH_CONNECTION_MS, FreshAgent, type FreshAgentOptions } from './connections.js';
export type {
  ExitingEvent,
  StalledEvent,
  WorkerEvent,
  WorkerEventBody,
  WorkerEventName,
  WorkerLine,
} from './events.js';
export type {
  ClaimedLease,
  EffectInput,
  EffectSender,
  Handler,
  HookOptions,
  JobContext,
  JobOutcome,
  QueueApi,
  SendOutcome,
  WorkerHooks,
} from './types.js';
