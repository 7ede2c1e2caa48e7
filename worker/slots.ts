// `run()`: up to `concurrency` + `prefetch` slots, each running one job after another under its
// own kept lease, at most `concurrency` handlers at once. Free slots are filled by one
// long-polled claim at a time; a finished job brings the slot's next one back in its own request.
// A stop ends the claims, hands back the leases still waiting for a turn, gives running handlers
// `graceMs`, then releases the leases of those still running.
import { setMaxListeners } from 'node:events';
import { QueueError } from '../queue/client.js';
import type { WorkerEventBody } from './events.js';
import { MAX_CONCURRENCY, type ResolvedWorkerOptions } from './options.js';
import {
  AUTO_PREFETCH_SAMPLES,
  autoPrefetch,
  autoPrefetchSlack,
  claimedEvent,
  claimSize,
  errorMessage,
  type HandlerSpan,
} from './rules.js';
import { runLease, type RunLeaseDeps } from './run-lease.js';
import { HandlerTurns } from './turns.js';
import type { ClaimedLease, Handler, QueueApi } from './types.js';

export interface RunOptions {
  /**
   * Abort to stop: no new claims; running handlers get `graceMs` to end by themselves, then
   * their leases are released and their signals aborted. A handler that ends sooner by throwing
   * this signal's reason (or an AbortError it caused, as a wait given this signal throws) has its
   * lease released at once, not failed.
   */
  signal?: AbortSignal | undefined;
  /** Stop after this many claims (default: no limit). */
  maxJobs?: number | undefined;
}

export interface WorkerSummary {
  claimed: number;
  finished: number;
  failed: number;
  lost: number;
  /** Leases handed back unfinished: when the worker stopped, or held ahead (`prefetch: 'auto'`) and waiting too long for a turn. */
  released: number;
}

/** What a lease's run needs besides the stop, the grace and the choice of a next job. */
export type LeaseDeps = Omit<RunLeaseDeps, 'stopSignal' | 'graceSignal' | 'wantNext' | 'handlerTurns' | 'started'>;

/** What a run takes from its worker. */
export interface RunParts {
  options: ResolvedWorkerOptions;
  queue: QueueApi;
  lease: LeaseDeps;
  emit(event: WorkerEventBody): void;
}

/** One `run()`: the slots, the claim that fills them, the budget of `maxJobs`, and the stop. */
export class WorkerRun {
  private readonly summary: WorkerSummary = { claimed: 0, finished: 0, failed: 0, lost: 0, released: 0 };
  /** Aborted by the caller's signal, or by an error that ends the run. */
  private readonly stop = new AbortController();
  private readonly slots = new Set<Promise<void>>();
  /** Claims asked for and not answered yet: they count against `maxJobs`. */
  private reserved = 0;
  private claiming: Promise<void> | undefined;
  /** Aborted `graceMs` after the stop: handlers still running then are abandoned, their leases released. */
  private readonly graceOver = new AbortController();
  private graceTimer: NodeJS.Timeout | undefined;
  private failure: { error: unknown } | undefined;
  private wake: () => void = () => {};
  /** With `prefetch`, the `concurrency` turns at the handler that the slots share. */
  private readonly handlerTurns: HandlerTurns | undefined;
  /** The most recent handlers' turns, oldest first: the time `prefetch: 'auto'` follows. */
  private readonly spans: HandlerSpan[] = [];

  constructor(
    private readonly parts: RunParts,
    private readonly handler: Handler,
    private readonly options: RunOptions,
  ) {
    const { concurrency, prefetch } = parts.options;
    this.handlerTurns = prefetch === 'auto' || prefetch > 0 ? new HandlerTurns(concurrency) : undefined;
    // Every lease held listens to both while it waits or runs: up to 100 leases, not a leak.
    setMaxListeners(2 * MAX_CONCURRENCY, this.stop.signal, this.graceOver.signal);
  }

  async run(): Promise<WorkerSummary> {
    const { parts, options } = this;
    const { leaseMs, heartbeatMs, pollMs, concurrency, prefetch, waitMs, graceMs } = parts.options;
    parts.emit({ event: 'started', leaseMs, heartbeatMs, pollMs, concurrency, prefetch, waitMs, graceMs });
    // The stop carries the caller's reason: a handler that ends by throwing it (or an AbortError it
    // caused) gave its job up to the stop, and the job is released rather than failed.
    const onAbort = () => this.stop.abort(options.signal?.reason);
    options.signal?.addEventListener('abort', onAbort, { once: true });
    this.stop.signal.addEventListener('abort', () => this.stopping(), { once: true });
    if (options.signal?.aborted) this.stop.abort(options.signal.reason);
    try {
      for (;;) {
        const changed = new Promise<void>((resolve) => (this.wake = resolve));
        this.fill();
        if (!this.claiming && this.slots.size === 0 && (this.stop.signal.aborted || this.budget() <= 0)) break;
        await changed;
      }
    } finally {
      options.signal?.removeEventListener('abort', onAbort);
      clearTimeout(this.graceTimer);
    }
    parts.emit({ event: 'stopped', ...this.summary });
    if (this.failure) throw this.failure.error;
    return this.summary;
  }

  /** Claims for the free slots, one claim at a time; its leases each start a slot. */
  private fill(): void {
    if (this.claiming || this.stop.signal.aborted) return;
    const prefetch = this.prefetch();
    if (this.slack(prefetch)?.claimMore === false) return;
    const { concurrency } = this.parts.options;
    const max = claimSize({ concurrency, prefetch, running: this.slots.size, budget: this.budget() });
    if (max === 0) return;
    const received = this.reserve(max);
    this.claiming = this.claimUpTo(max, this.stop.signal)
      .then(
        (leases) => {
          received(leases.length);
          for (const claimed of leases) this.startSlot(claimed);
        },
        (error: unknown) => {
          received(0);
          this.fail(error);
        },
      )
      .finally(() => {
        this.claiming = undefined;
        this.wake();
      });
  }

  /** A slot runs its job, then each next job its finish brings back, until none comes. */
  private startSlot(first: ClaimedLease): void {
    const slot = (async () => {
      /** The hold on the budget that this slot's current finish took for its next job. */
      let received: ((count: number) => void) | undefined;
      // One for the slot's whole life, not one per job.
      const deps: RunLeaseDeps = {
        ...this.parts.lease,
        stopSignal: this.stop.signal,
        graceSignal: this.graceOver.signal,
        handlerTurns: this.handlerTurns,
        started: () => this.started(),
        wantNext: () => {
          if (this.stop.signal.aborted || this.budget() <= 0) return false;
          // Far fewer leases to hold now (`prefetch: 'auto'`, the handlers grew slower): this slot ends with its job.
          if (this.slack()?.endSlot) return false;
          received = this.reserve(1);
          return true;
        },
      };
      let claimed: ClaimedLease | null = first;
      while (claimed) {
        // Cast: the compiler cannot see that `wantNext` sets it during the await.
        received = undefined as typeof received;
        const { outcome, next } = await runLease(claimed, this.handler, deps);
        received?.(next ? 1 : 0);
        this.summary[outcome.status] += 1;
        claimed = next;
      }
    })()
      .catch((error: unknown) => this.fail(error))
      .finally(() => {
        this.slots.delete(slot);
        this.wake();
      });
    this.slots.add(slot);
  }

  /** The leases to hold beyond `concurrency` now: the fixed `prefetch`, or what the handlers' time asks for. */
  private prefetch(): number {
    const { concurrency, prefetch, clock } = this.parts.options;
    if (prefetch !== 'auto') return prefetch;
    return autoPrefetch({
      concurrency,
      spans: this.spans,
      now: clock.now(),
      max: MAX_CONCURRENCY - concurrency,
      holding: this.slots.size > concurrency,
    });
  }

  /** With `prefetch: 'auto'`, whether to claim more and whether a slot whose job is done ends; undefined for a fixed prefetch. */
  private slack(target = this.prefetch()): { claimMore: boolean; endSlot: boolean } | undefined {
    const { concurrency, prefetch } = this.parts.options;
    if (prefetch !== 'auto') return undefined;
    return autoPrefetchSlack({ concurrency, target, held: this.slots.size });
  }

  /**
   * A handler started: its turn joins the handlers' time, and is ended by the function returned
   * when the handler returns. When the time asks for more leases, a claim fills them.
   */
  private started(): () => void {
    const { clock } = this.parts.options;
    const span: HandlerSpan = { start: clock.now() };
    this.spans.push(span);
    if (this.spans.length > AUTO_PREFETCH_SAMPLES) this.spans.shift();
    // Slots whose finishes bring their next jobs never end, so nothing else would claim again.
    if (!this.claiming && this.slack()?.claimMore) this.wake();
    return () => {
      span.end = clock.now();
    };
  }

  private stopping(): void {
    const { parts } = this;
    const { graceMs } = parts.options;
    parts.emit({ event: 'stopping', running: this.slots.size, graceMs });
    this.graceTimer = setTimeout(() => {
      if (this.slots.size > 0) parts.emit({ event: 'grace_over', running: this.slots.size });
      this.graceOver.abort();
    }, graceMs);
    this.wake();
  }

  /**
   * Up to `max` leases, waiting at the queue up to `waitMs` for the first (long poll).
   * An answer that came back empty before the wait was over, or a claim that failed, is followed
   * by a pause of `pollMs`, so an idle worker never spins.
   */
  private async claimUpTo(max: number, signal: AbortSignal): Promise<ClaimedLease[]> {
    const { clock, leaseMs, waitMs, pollMs, name } = this.parts.options;
    const claimedAt = clock.now();
    let leases;
    try {
      leases = await this.parts.queue.claimMany(name, { max, leaseMs, waitMs }, { signal });
    } catch (err) {
      // Stopping: the claim is dropped. One the queue made just then is never received, and
      // its lease runs out (rule 2) — the job is claimable again after it, one attempt spent.
      if (signal.aborted) return [];
      // An unreachable or failing queue is waited out; a refused request is a mistake to report.
      if (!(err instanceof QueueError) || err.status < 500) throw err;
      this.parts.emit({ event: 'claim_failed', error: errorMessage(err) });
      await pause(pollMs, signal);
      return [];
    }
    const answeredAt = clock.now();
    // A claim that waited its whole waitMs at the queue has waited already; any other empty
    // answer (waitMs 0 above all, which never waits) is followed by the pause.
    const waitedOut = waitMs > 0 && answeredAt - claimedAt >= waitMs;
    if (leases.length === 0 && !waitedOut) await pause(pollMs, signal);
    for (const lease of leases) this.parts.emit(claimedEvent(lease));
    return leases.map((lease) => ({ lease, claimedAt, answeredAt }));
  }

  private fail(error: unknown): void {
    this.failure ??= { error };
    this.stop.abort();
  }

  /**
   * Holds `count` of the `maxJobs` budget for a claim on its way, the one place `reserved`
   * changes. The claim's answer calls the returned function with the leases it brought: they
   * are counted as claimed, and the hold is given back.
   */
  private reserve(count: number): (received: number) => void {
    this.reserved += count;
    return (received) => {
      this.reserved -= count;
      this.summary.claimed += received;
    };
  }

  private budget(): number {
    const { maxJobs } = this.options;
    return maxJobs === undefined ? Infinity : maxJobs - this.summary.claimed - this.reserved;
  }
}

/** Waits `ms`, or less when `signal` aborts. */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    if (signal.aborted) done();
    else signal.addEventListener('abort', done, { once: true });
  });
}
