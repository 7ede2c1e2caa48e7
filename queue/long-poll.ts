// Long-polling claims: a claimer that finds nothing waits, in one request, until a job may
// have become claimable (the store's signal after an enqueue or a fail, or a re-poll for jobs
// that become claimable by time alone), then claims. Waiters are served first come, first
// served, one claim at a time, so a single new job wakes one claim rather than all of them.
import { QueueError } from './errors.js';
import type { QueueStore } from './store.js';
import type { Lease } from './types.js';
import { checkOptionNames, type OptionNames } from '../platform/option-names.js';

export interface LongPollOptions {
  /**
   * How often waiters look again without a signal, for jobs that become claimable by time
   * alone (a runAt reached, a lease expired). Default 250 ms.
   */
  repollMs?: number;
  /**
   * The most claims waiting at once (default 512). Each holds a connection and its request
   * while it waits; one more is `503 too_many_waiters` at once, and a worker waits it out like
   * an unavailable queue. A claim with `waitMs` 0 never waits, so it is never refused.
   */
  maxWaiters?: number;
}

export const DEFAULT_MAX_CLAIM_WAITERS = 512;

const LONG_POLL_OPTION_NAMES: OptionNames<LongPollOptions> = { repollMs: true, maxWaiters: true };

interface Waiter {
  owner: string;
  leaseMs: number;
  max: number;
  signal: AbortSignal | undefined;
  /** A claim for this waiter is running: its timeout waits for the claim's answer. */
  claiming: boolean;
  /** Its time ran out while a claim was running. */
  expired: boolean;
  settle(leases: Lease[]): void;
  fail(err: unknown): void;
}

export class ClaimWaiters {
  private readonly waiters: Waiter[] = [];
  private readonly unsubscribe: () => void;
  private readonly repollMs: number;
  private readonly maxWaiters: number;
  private repoll: NodeJS.Timeout | undefined;
  private pumping: Promise<void> | undefined;
  private again = false;
  private closed = false;

  constructor(
    private readonly store: QueueStore,
    options: LongPollOptions = {},
  ) {
    checkOptionNames('ClaimWaiters', options, LONG_POLL_OPTION_NAMES);
    this.repollMs = options.repollMs ?? 250;
    this.maxWaiters = options.maxWaiters ?? DEFAULT_MAX_CLAIM_WAITERS;
    this.unsubscribe = store.onClaimable(() => this.pump());
  }

  /** Waiters now: for metrics and tests. */
  get waiting(): number {
    return this.waiters.length;
  }

  /**
   * Claims up to `max` jobs for `owner` now; when there are none and `waitMs` > 0, waits until
   * there are, `waitMs` passes, `signal` aborts (the caller hung up) or the service closes.
   * Empty when nothing was claimed. Waiters that arrived earlier are served first, so a new
   * claimer never takes a job ahead of one already waiting.
   */
  async claim(owner: string, leaseMs: number, max: number, waitMs: number, signal?: AbortSignal): Promise<Lease[]> {
    if (this.waiters.length === 0 || waitMs === 0) {
      const leases = await this.store.claimMany(owner, leaseMs, max);
      if (leases.length > 0 || waitMs === 0 || this.closed) return leases;
    }
    if (this.waiters.length >= this.maxWaiters) throw tooManyWaiters(this.maxWaiters);
    return new Promise<Lease[]>((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        const at = this.waiters.indexOf(waiter);
        if (at >= 0) this.waiters.splice(at, 1);
        if (this.waiters.length === 0) this.stopRepoll();
      };
      const waiter: Waiter = {
        owner,
        leaseMs,
        max,
        signal,
        claiming: false,
        expired: false,
        settle: (leases) => {
          done();
          resolve(leases);
        },
        fail: (err) => {
          done();
          reject(err);
        },
      };
      // A timeout during a running claim would answer "nothing" while a lease is being made for
      // this caller, who is still connected: let that claim's answer be the answer instead.
      const timer = setTimeout(() => {
        if (waiter.claiming) waiter.expired = true;
        else waiter.settle([]);
      }, waitMs);
      const onAbort = () => waiter.settle([]);
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiters.push(waiter);
      this.startRepoll();
      // Something may have become claimable between the claim above and joining the line.
      this.pump();
    });
  }

  /** Answers every waiter with nothing and stops listening: the service is closing. */
  close(): void {
    this.closed = true;
    this.unsubscribe();
    this.stopRepoll();
    for (const waiter of [...this.waiters]) waiter.settle([]);
  }

  private startRepoll(): void {
    this.repoll ??= setInterval(() => this.pump(), this.repollMs);
    this.repoll.unref();
  }

  private stopRepoll(): void {
    clearInterval(this.repoll);
    this.repoll = undefined;
  }

  /** Serves waiters in order while claims succeed; a signal during a pass runs another pass. */
  private pump(): void {
    if (this.pumping) {
      this.again = true;
      return;
    }
    this.pumping = (async () => {
      do {
        this.again = false;
        await this.serve();
      } while (this.again && this.waiters.length > 0);
    })().finally(() => {
      this.pumping = undefined;
    });
  }

  private async serve(): Promise<void> {
    for (;;) {
      const waiter = this.waiters[0];
      if (!waiter || this.closed) return;
      if (waiter.signal?.aborted) {
        waiter.settle([]);
        continue;
      }
      let leases: Lease[];
      waiter.claiming = true;
      try {
        leases = await this.store.claimMany(waiter.owner, waiter.leaseMs, waiter.max);
      } catch (err) {
        waiter.fail(err);
        continue;
      } finally {
        waiter.claiming = false;
      }
      if (leases.length === 0) {
        if (waiter.expired) waiter.settle([]);
        return;
      }
      // A waiter that hung up while its claim ran is answered all the same; an answer nobody
      // reads ends like an aborted claim: the lease simply expires (rules 2 and 5).
      waiter.settle(leases);
    }
  }
}

function tooManyWaiters(maxWaiters: number): QueueError {
  return new QueueError(
    'too_many_waiters',
    `${maxWaiters} claims are already waiting for jobs, as many as the queue holds at once; claim again shortly, or with a shorter waitMs.`,
    { maxWaiters },
  );
}
