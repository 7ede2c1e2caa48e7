// The queue's SQL operations, each a function of (executor, ..., now) that runs on any executor
// inside a write transaction: what KnexQueueStore composes, and the one entry point into the
// queue's internals that the lint boundary rule allows the benchmark (eslint.config.js), whose
// profile runs the store's own statements on a bare driver. Tested in test/queue/sql-entry.test.ts.
export { claimManyIn } from './claim.js';
export { enqueueIn } from './enqueue.js';
export { finishIn } from './finish.js';
export type { SqlDialect } from './dialects.js';
