// Keeps one lease alive while its handler runs, and decides when it is lost: the queue refused
// a renewal, or no renewal succeeded before the worker's estimate of the lease's end. A loss
// stops renewals and new sends at once, and aborts the handler's signal.
import { setTimeout as delay } from 'node:timers/promises';
import type { TimerHandle, Timers } from '../platform/clock.js';
import type { Lease } from '../queue/types.js';
import { LeaseLostError, type LossDuring } from './errors.js';
import type { WorkerEventBody } from './events.js';
import type { ResolvedWorkerOptions } from './options.js';
import { estimateLeaseEnd, mayBeCancelled, refusalOf, refusedEvent, withDeadReason, type Refusal } from './rules.js';
import type { ClaimedLease, QueueApi } from './types.js';

export interface KeeperDeps {
  claimed: ClaimedLease;
  options: Pick<ResolvedWorkerOptions, 'leaseMs' | 'heartbeatMs' | 'retryMs' | 'sendGraceMs' | 'clock' | 'timers'>;
  /** Renewals, and the read that tells a cancel from another end of the job. */
  renewals: Pick<QueueApi, 'heartbeat' | 'get'>;
  emit(event: WorkerEventBody): void;
}

export class LeaseKeeper {
  private current: Lease;
  private estimatedEnd: number;
  private loss: LeaseLostError | undefined;
  /** Aborted the moment the lease is lost: ends the keeper's own waits. */
  private readonly lossController = new AbortController();
  /** The handler's signal: aborted on loss once no send is on its way, or after the grace. */
  private readonly handlerController = new AbortController();
  /** The worker's clock's timers: a test's manual clock moves renewals and losses too. */
  private readonly timers: Timers;
  private heartbeatTimer: TimerHandle | undefined;
  private deadlineTimer: TimerHandle | undefined;
  private graceTimer: TimerHandle | undefined;
  private renewing: Promise<Lease> | undefined;
  private sendsInFlight = 0;
  private sendsSettled: Array<() => void> = [];
  private stopped = false;

  constructor(private readonly deps: KeeperDeps) {
    const { claimed, options } = deps;
    this.timers = options.timers;
    this.current = claimed.lease;
    // A claim that waited at the queue was made at some moment of the wait, so "sent + leaseMs"
    // may already be past. Such a lease is renewed before its handler starts (`renewFirst`);
    // until then the estimate only bounds how long renewing is tried.
    const base = this.renewFirst ? (claimed.answeredAt ?? claimed.claimedAt) : claimed.claimedAt;
    this.estimatedEnd = estimateLeaseEnd(base, options.leaseMs, claimed.lease);
  }

  /** The claim waited long enough that the lease must be renewed before the handler may rely on it. */
  get renewFirst(): boolean {
    const { claimedAt, answeredAt } = this.deps.claimed;
    return answeredAt !== undefined && answeredAt - claimedAt >= this.deps.options.heartbeatMs;
  }

  get lease(): Lease {
    return this.current;
  }

  get signal(): AbortSignal {
    return this.handlerController.signal;
  }

  get lost(): LeaseLostError | undefined {
    return this.loss;
  }

  /** The worker's estimate of `leaseUntil`, on its own clock. */
  get leaseEndEstimate(): number {
    return this.estimatedEnd;
  }

  start(): void {
    this.armHeartbeat(this.deps.options.heartbeatMs);
    this.armDeadline();
  }

  /** Renews now; a failed attempt is retried until one succeeds or the lease is lost. */
  async renew(stage?: string): Promise<Lease> {
    for (;;) {
      if (this.loss) throw this.loss;
      if (this.stopped) throw new Error(`The job "${this.current.id}" is over; its lease is no longer renewed.`);
      // One renewal at a time: wait for the one in flight, then send a fresh one for this stage.
      if (this.renewing) {
        await this.renewing.catch(() => {});
        continue;
      }
      try {
        return await this.renewOnce(stage);
      } catch (err) {
        if (err instanceof LeaseLostError) throw err;
      }
      await delay(this.deps.options.retryMs, undefined, { signal: this.lossController.signal }).catch(() => {});
    }
  }

  /**
   * Runs one send. A send checks the lease before it starts; once started it is on its way,
   * and a loss meanwhile does not cut it at once: the gateway verifies the token itself, so
   * cutting the request would protect nothing and lose its answer. The handler's signal aborts
   * when the last such send has answered, or after `sendGraceMs`.
   */
  async send<T>(run: (signal: AbortSignal) => Promise<T>): Promise<T> {
    if (this.loss) throw this.loss;
    if (this.handlerController.signal.aborted) throw this.handlerController.signal.reason;
    if (this.stopped) throw new Error(`The job "${this.current.id}" is over; nothing more is sent under its lease.`);
    this.sendsInFlight += 1;
    try {
      return await run(this.handlerController.signal);
    } finally {
      this.sendsInFlight -= 1;
      if (this.sendsInFlight === 0) {
        if (this.loss) this.abortHandler();
        for (const settled of this.sendsSettled.splice(0)) settled();
      }
    }
  }

  /** Records a refusal of this lease (by the queue, the gateway or the receiver) as its loss. */
  refused(refusal: Refusal, during: LossDuring): LeaseLostError {
    this.lose(this.lossOf(refusal.reason, during, refusal));
    return this.loss!;
  }

  /**
   * The refusal with the reason the job's row gives: a `not_leased` refusal of a `dead` job is
   * `cancelled` when the queue says so. A read that fails leaves the refusal as it was.
   */
  async explain(refusal: Refusal): Promise<Refusal> {
    if (!mayBeCancelled(refusal)) return refusal;
    const job = await this.deps.renewals.get(this.current.id).catch(() => undefined);
    return withDeadReason(refusal, job);
  }

  /** The worker is stopping and the grace time is over: no more sends, and the handler's signal aborts. */
  abandon(reason: Error): void {
    if (!this.handlerController.signal.aborted) this.handlerController.abort(reason);
  }

  /** Stops renewing, then waits for a renewal and any send still on its way, so their answers count. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.timers.clearTimer(this.heartbeatTimer);
    this.timers.clearTimer(this.deadlineTimer);
    while (this.renewing) await this.renewing.catch(() => {});
    if (this.sendsInFlight > 0) await new Promise<void>((resolve) => this.sendsSettled.push(resolve));
    this.timers.clearTimer(this.graceTimer);
  }

  private renewOnce(stage?: string): Promise<Lease> {
    const { id, owner, token } = this.current;
    const sentAt = this.deps.options.clock.now();
    const attempt = this.deps.renewals.heartbeat(id, { owner, token }).then(
      (lease) => {
        // A renewal that lands after the loss was decided does not revive the lease.
        if (this.loss) throw this.loss;
        this.current = { ...this.current, leaseUntil: lease.leaseUntil };
        this.estimatedEnd = estimateLeaseEnd(sentAt, this.deps.options.leaseMs, lease);
        this.deps.emit({ event: 'renewed', job: id, token, leaseUntil: lease.leaseUntil, ...(stage ? { stage } : {}) });
        this.armDeadline();
        this.armHeartbeat(this.deps.options.heartbeatMs);
        return this.current;
      },
      async (err: unknown) => {
        const refusal = refusalOf(err);
        if (refusal) {
          this.deps.emit(refusedEvent('renew', id, token, refusal));
          throw this.refused(await this.explain(refusal), 'renew');
        }
        this.deps.emit({
          event: 'call_failed',
          op: 'renew',
          job: id,
          token,
          error: err instanceof Error ? err.message : String(err),
        });
        throw err;
      },
    );
    this.renewing = attempt;
    const done = () => {
      if (this.renewing === attempt) this.renewing = undefined;
    };
    attempt.then(done, done);
    return attempt;
  }

  private beat(): void {
    this.heartbeatTimer = undefined;
    // Whoever has a renewal in flight re-arms the timer when it answers.
    if (this.stopped || this.loss || this.renewing) return;
    this.renewOnce().catch((err: unknown) => {
      if (!(err instanceof LeaseLostError)) this.armHeartbeat(this.deps.options.retryMs);
    });
  }

  private armHeartbeat(ms: number): void {
    this.timers.clearTimer(this.heartbeatTimer);
    if (this.stopped || this.loss) return;
    this.heartbeatTimer = this.timers.setTimer(() => this.beat(), ms);
  }

  /** No renewal succeeded before the estimated end: the lease must be taken as gone. */
  private armDeadline(): void {
    this.timers.clearTimer(this.deadlineTimer);
    if (this.stopped || this.loss) return;
    const ms = Math.max(0, this.estimatedEnd - this.deps.options.clock.now());
    this.deadlineTimer = this.timers.setTimer(() => this.lose(this.lossOf('not_renewed', 'renew')), ms);
  }

  private lose(loss: LeaseLostError): void {
    if (this.loss) {
      // The queue's refusal explains a loss first noticed by the clock better: keep its words.
      if (!this.loss.confirmed && loss.confirmed) this.loss = loss;
      return;
    }
    this.loss = loss;
    this.timers.clearTimer(this.heartbeatTimer);
    this.timers.clearTimer(this.deadlineTimer);
    this.deps.emit({
      event: 'lost',
      job: loss.jobId,
      token: loss.expected.token,
      during: loss.during,
      reason: loss.reason,
      ...(loss.current ? { current: loss.current } : {}),
      error: loss.message,
    });
    this.lossController.abort(loss);
    if (this.sendsInFlight === 0) this.abortHandler();
    else this.graceTimer = this.timers.setTimer(() => this.abortHandler(), this.deps.options.sendGraceMs);
  }

  private abortHandler(): void {
    this.timers.clearTimer(this.graceTimer);
    if (!this.handlerController.signal.aborted) this.handlerController.abort(this.loss);
  }

  private lossOf(reason: LeaseLostError['reason'], during: LossDuring, refusal?: Refusal): LeaseLostError {
    const { id, owner, token } = this.current;
    return new LeaseLostError({
      jobId: id,
      expected: { owner, token },
      during,
      reason,
      current: refusal?.current,
      cause: refusal?.message,
    });
  }
}
