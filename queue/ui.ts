// The queue's live page, read-only: GET /ui serves the page (ui-page.ts), GET /ui/state what it
// shows. It reads the store's counts and lists, plus two rings kept in memory by the app: the
// latest stale-lease refusals it answered and the latest claims it granted (the token history).
import express, { type ErrorRequestHandler, type RequestHandler, type Router } from 'express';
import { systemClock, type Clock } from '../platform/clock.js';
import { QueueError } from './errors.js';
import type { QueueStore } from './store.js';
import type { CurrentLease, Job, JobStatus, JobSummary, Lease, Presented, StaleReason, Stats } from './types.js';
import { UI_PAGE, UI_PAGE_HEADERS } from './ui-page.js';

export interface QueueUiOptions {
  store: QueueStore;
  clock?: Clock;
  /** How many stale-lease refusals are kept (default 100). */
  refusalsKept?: number;
  /** How many claims are kept for the token history (default 500). */
  claimsKept?: number;
  /** Several open pages within this many ms share one read of the store (default 500). */
  shareMs?: number;
}

export interface UiRefusal {
  at: number;
  /** The call refused, by its route: `heartbeat`, `finish`, `fail`, `release`, `verify`. */
  op: string;
  job: string;
  presented: Presented | null;
  reason: StaleReason | null;
  current: CurrentLease | null;
}

export interface UiClaim {
  at: number;
  job: string;
  owner: string;
  token: number;
  attempt: number;
}

export interface UiJob {
  id: string;
  qty: number;
  status: JobStatus;
  owner: string | null;
  token: number;
  attempts: number;
  leaseUntil: number | null;
  updatedAt: number;
}

export interface UiState {
  /** The queue's clock when the state was read: time left is `leaseUntil - now`. */
  now: number;
  stats: Stats;
  /** The first jobs of each status, in the order they were enqueued; done, the latest finished. */
  jobs: Record<JobStatus, UiJob[]>;
  /** Newest first. */
  refusals: UiRefusal[];
  /** Per job, its claims oldest first; the jobs most recently claimed first. */
  tokens: Array<{ job: string; claims: UiClaim[] }>;
}

const LISTED = 20;
const LEASES_LISTED = 100;
const TOKEN_JOBS = 20;

/** A fixed-size ring: adding is O(1) and never allocates past its size. */
class Ring<T> {
  private readonly items: T[] = [];
  private next = 0;
  constructor(private readonly size: number) {}

  push(item: T): void {
    if (this.items.length < this.size) this.items.push(item);
    else this.items[this.next] = item;
    this.next = (this.next + 1) % this.size;
  }

  /** Newest first. */
  newest(): T[] {
    const ordered = [...this.items.slice(this.next), ...this.items.slice(0, this.next)];
    return ordered.reverse();
  }
}

export class QueueUi {
  private readonly store: QueueStore;
  private readonly clock: Clock;
  private readonly refusals: Ring<UiRefusal>;
  private readonly claims: Ring<UiClaim>;
  private readonly finished = new Ring<UiJob>(LISTED);
  private readonly shareMs: number;
  private shared: { at: number; state: Promise<UiState> } | undefined;

  constructor(options: QueueUiOptions) {
    this.store = options.store;
    this.clock = options.clock ?? systemClock;
    this.refusals = new Ring(options.refusalsKept ?? 100);
    this.claims = new Ring(options.claimsKept ?? 500);
    this.shareMs = options.shareMs ?? 500;
  }

  /** A lease the queue just granted. */
  claimed(lease: Lease): void {
    this.claims.push({
      at: this.clock.now(),
      job: lease.id,
      owner: lease.owner,
      token: lease.token,
      attempt: lease.attempt,
    });
  }

  /** A job the queue just finished: the page lists the latest without asking the store. */
  done(job: Job): void {
    this.finished.push(uiJob(job));
  }

  /** A stale_lease answer for `op` on job `id`; anything else is not recorded. */
  refused(op: string, id: string, err: unknown): void {
    if (!(err instanceof QueueError) || err.code !== 'stale_lease') return;
    const details = err.details as { reason?: StaleReason; expected?: Presented; current?: CurrentLease };
    this.refusals.push({
      at: this.clock.now(),
      op,
      job: id,
      presented: details.expected ?? null,
      reason: details.reason ?? null,
      current: details.current ?? null,
    });
  }

  /** Error middleware before the renderer: each stale_lease a route throws, on its way out. */
  readonly recordRefusals: ErrorRequestHandler = (err, req, _res, next) => {
    if (err instanceof QueueError && err.code === 'stale_lease') {
      const route = /^\/jobs\/([^/]+)\/([a-z]+)$/.exec(req.path);
      this.refused(route?.[2] ?? req.path, route ? decoded(route[1]!) : '', err);
    }
    next(err);
  };

  /** GET /ui: the page alone, the same for every caller; it holds no data, /ui/state does. */
  readonly page: RequestHandler = (_req, res) => {
    res.set(UI_PAGE_HEADERS).type('html').send(UI_PAGE);
  };

  /** GET /ui/state, behind `before` (the app's body reader). */
  router(...before: RequestHandler[]): Router {
    const router = express.Router();
    router.get('/ui/state', ...before, async (_req, res) => {
      res.set('Cache-Control', 'no-store').json(await this.state());
    });
    return router;
  }

  /** What the page shows; pages polling at once share one read of the store. */
  state(): Promise<UiState> {
    const now = this.clock.now();
    if (this.shared && now - this.shared.at < this.shareMs) return this.shared.state;
    const state = this.read(now);
    this.shared = { at: now, state };
    // A failed read is not shared: the next poll tries again.
    state.catch(() => {
      if (this.shared?.state === state) this.shared = undefined;
    });
    return state;
  }

  private async read(now: number): Promise<UiState> {
    const stats = await this.store.stats();
    // Without payloads and results: what the page shows costs the same whatever the jobs carry.
    const listed = async (status: JobStatus, count: number, limit: number) =>
      count > 0 ? (await this.store.listSummaries({ status, limit })).jobs : [];
    const [pending, leased, dead] = await Promise.all([
      listed('pending', stats.pending, LISTED),
      listed('leased', stats.leased, LEASES_LISTED),
      listed('dead', stats.dead, LISTED),
    ]);
    return {
      now,
      stats,
      jobs: {
        pending: pending.map(uiJob),
        leased: leased.map(uiJob),
        done: this.finished.newest(),
        dead: dead.map(uiJob),
      },
      refusals: this.refusals.newest(),
      tokens: this.tokenHistory(),
    };
  }

  private tokenHistory(): UiState['tokens'] {
    const byJob = new Map<string, UiClaim[]>();
    for (const claim of this.claims.newest()) {
      const claims = byJob.get(claim.job);
      if (claims) claims.push(claim);
      else if (byJob.size < TOKEN_JOBS) byJob.set(claim.job, [claim]);
    }
    return [...byJob].map(([job, claims]) => ({ job, claims: claims.reverse() }));
  }
}

function uiJob(job: JobSummary): UiJob {
  return {
    id: job.id,
    qty: job.qty,
    status: job.status,
    owner: job.owner,
    token: job.token,
    attempts: job.attempts,
    leaseUntil: job.leaseUntil,
    updatedAt: job.updatedAt,
  };
}

function decoded(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}
