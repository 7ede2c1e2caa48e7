// The queue's own metrics: the store wrapped so that every claim, finish and stale-lease
// refusal is counted where it happens, whichever route (or long poll) made it; and the series
// read at scrape time — jobs by status, transactions and their writes, claimers waiting.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { countedElsewhere } from '../platform/metrics.js';
import { QueueError } from './errors.js';
import type { QueueStore } from './store.js';
import type { Job, JobStatus, Lease } from './types.js';

/** Lease time left at an accepted finish, in ms: from a finish at the wire to one well ahead. */
const LEASE_LEFT_BUCKETS_MS = [0, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000, 60_000, 300_000];

const STATUSES: readonly JobStatus[] = ['pending', 'leased', 'done', 'dead'];

/** The fenced calls whose refusals are counted, by the name of the store method. */
type FencedOp = 'heartbeat' | 'finish' | 'fail' | 'verify' | 'release';

/**
 * Registers the queue's series on `registry` and returns `store` with its claims, finishes and
 * refusals counted. `waiting` reads how many long-polling claims wait now.
 */
export function observeQueueStore(store: QueueStore, registry: Registry, waiting: () => number): QueueStore {
  const claims = new Counter({
    name: 'leasehold_queue_claims_total',
    help: 'Leases handed out: by claims, batched claims and finishes that claim the next job.',
    registers: [registry],
  });
  const finishes = new Counter({
    name: 'leasehold_queue_finishes_total',
    help: 'Finishes accepted (the job is done).',
    registers: [registry],
  });
  const refusals = new Counter({
    name: 'leasehold_queue_stale_lease_refusals_total',
    help: 'Calls refused 409 stale_lease, by call and by reason (not_leased, token_mismatch, owner_mismatch, deadline_passed, lease_expired).',
    labelNames: ['op', 'reason'] as const,
    registers: [registry],
  });
  const leaseLeft = new Histogram({
    name: 'leasehold_queue_finish_lease_left_ms',
    help: 'At each accepted finish, how long its lease still had to run, in ms (leaseUntil - now; 0 for a late finish under --late-finish if-unclaimed).',
    buckets: LEASE_LEFT_BUCKETS_MS,
    registers: [registry],
  });
  new Gauge({
    name: 'leasehold_queue_jobs',
    help: 'Jobs by status, read from the store at each scrape.',
    labelNames: ['status'] as const,
    registers: [registry],
    async collect() {
      const stats = await store.stats();
      for (const status of STATUSES) this.set({ status }, stats[status]);
    },
  });
  countedElsewhere(
    registry,
    'leasehold_queue_transactions_total',
    'Write transactions committed by this process; with group commit on SQLite several writes share one.',
    () => store.writeStats().transactions,
  );
  countedElsewhere(
    registry,
    'leasehold_queue_transaction_writes_total',
    'Writes (enqueues, claims, finishes...) carried by those transactions; writes per transaction is the ratio of the two rates.',
    () => store.writeStats().writes,
  );
  new Gauge({
    name: 'leasehold_queue_writes_per_transaction',
    help: 'Writes per write transaction since the process started (1 without group commit).',
    registers: [registry],
    collect() {
      const { transactions, writes } = store.writeStats();
      this.set(transactions === 0 ? 0 : writes / transactions);
    },
  });
  new Gauge({
    name: 'leasehold_queue_claim_waiters',
    help: 'Long-polling claims waiting for a job now.',
    registers: [registry],
    collect() {
      this.set(waiting());
    },
  });

  const fenced = async <T>(op: FencedOp, call: () => Promise<T>): Promise<T> => {
    try {
      return await call();
    } catch (err) {
      countRefusal(op, err);
      throw err;
    }
  };
  const countRefusal = (op: FencedOp, err: unknown) => {
    if (err instanceof QueueError && err.code === 'stale_lease') {
      refusals.inc({ op, reason: String(err.details.reason) });
    }
  };
  const finished = (job: Job) => {
    finishes.inc();
    // The finish leaves leaseUntil as it was and stamps updatedAt with the store's `now`.
    if (job.leaseUntil !== null) leaseLeft.observe(Math.max(0, job.leaseUntil - job.updatedAt));
  };
  const claimed = (leases: readonly Lease[]) => {
    if (leases.length > 0) claims.inc(leases.length);
  };

  const observed: Partial<QueueStore> = {
    claim: async (owner, leaseMs) => {
      const lease = await store.claim(owner, leaseMs);
      if (lease) claimed([lease]);
      return lease;
    },
    claimMany: async (owner, leaseMs, max) => {
      const leases = await store.claimMany(owner, leaseMs, max);
      claimed(leases);
      return leases;
    },
    finish: (id, presented, result) =>
      fenced('finish', async () => {
        const job = await store.finish(id, presented, result);
        finished(job);
        return job;
      }),
    finishAndClaim: (id, presented, result, leaseMs) =>
      fenced('finish', async () => {
        const answer = await store.finishAndClaim(id, presented, result, leaseMs);
        finished(answer.job);
        if (answer.next) claimed([answer.next]);
        return answer;
      }),
    finishMany: async (owner, items, next) => {
      const answer = await store.finishMany(owner, items, next);
      for (const result of answer.results) {
        if (result instanceof QueueError) countRefusal('finish', result);
        else finished(result);
      }
      claimed(answer.next);
      return answer;
    },
    heartbeat: (id, presented, leaseMs) => fenced('heartbeat', () => store.heartbeat(id, presented, leaseMs)),
    fail: (id, presented, error, retryInMs) => fenced('fail', () => store.fail(id, presented, error, retryInMs)),
    release: (id, presented) => fenced('release', () => store.release(id, presented)),
    verify: (id, presented) => fenced('verify', () => store.verify(id, presented)),
    verifyMany: async (presented) => {
      const answers = await store.verifyMany(presented);
      for (const answer of answers) if (answer instanceof QueueError) countRefusal('verify', answer);
      return answers;
    },
  };
  // Everything not counted (reads, enqueue, cancel, migrate, close...) reaches the store as is,
  // each method bound once rather than at every call.
  const bound = new Map<PropertyKey, { of: unknown; fn: unknown }>();
  return new Proxy(store, {
    get(target, property) {
      if (Object.hasOwn(observed, property)) return observed[property as keyof QueueStore];
      const value = Reflect.get(target, property) as unknown;
      if (typeof value !== 'function') return value;
      const cached = bound.get(property);
      if (cached?.of === value) return cached.fn;
      const fn = (value as (...args: unknown[]) => unknown).bind(target);
      bound.set(property, { of: value, fn });
      return fn;
    },
  });
}
