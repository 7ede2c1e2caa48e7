// Keeps one lease alive while its handler runs, and owns its loss: the timers and the requests
// around where the lease stands (lease-standing.ts, its state machine). `lose` is the one place
// a loss is decided and reported: a renewal, a send or a finish that is refused reports it here,
// as does the estimate of the lease's end. A loss stops renewals and new sends at once, and
// aborts the handler's signal once the sends on their way have answered.
import type { TimerHandle } from '../platform/clock.js';
import type { Lease } from '../queue/types.js';
import { LeaseLostError, type LossDuring } from './errors.js';
import type { WorkerEventBody } from './events.js';
import { LeaseStanding } from './lease-standing.js';
import type { ResolvedWorkerOptions } from './options.js';
import {
  estimateLeaseEnd,
  leaseIsShort,
  mayBeCancelled,
  refusalOf,
  refusedEvent,
  withDeadReason,
  type LeaseStep,
  type Refusal,
} from './rules.js';
import type { SendTimes } from './send-times.js';
import type { ClaimedLease, QueueApi } from './types.js';

export interface KeeperDeps {
  claimed: ClaimedLease;
  options: Pick<ResolvedWorkerOptions, 'leaseMs' | 'heartbeatMs' | 'retryMs' | 'sendGraceMs' | 'clock' | 'timers'>;
  /** Renewals, and the read that tells a cancel from another end of the job. */
  renewals: Pick<QueueApi, 'heartbeat' | 'get'>;
  /** How long the worker's sends take: a send on a lease with less left renews first. */
  sendTimes: SendTimes;
  emit(event: WorkerEventBody): void;
}

export class LeaseKeeper {
  private readonly standing: LeaseStanding;
  private current: Lease;
  private estimatedEnd: number;
  /** When the next timer renewal is due, on the worker's clock. */
  private beatAt = Infinity;
  /**
   * The keeper's one timer: while held, the next timer renewal or the estimated end, whichever
   * comes first (only the end while a renewal is in flight); once lost, the send grace. On the
   * worker's clock's timers: a test's manual clock moves it too.
   */
  private timer: TimerHandle | undefined;
  /** The handler's signal: aborted on loss once no send is on its way, or after the grace. */
  private readonly handlerController = new AbortController();
  private renewing: Promise<Lease> | undefined;
  private sendsInFlight = 0;

  constructor(private readonly deps: KeeperDeps) {
    const { claimed, options } = deps;
    this.current = claimed.lease;
    this.standing = new LeaseStanding(claimed.lease);
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

  /** Set from the moment a service refused the lease or the estimate gave up on it. */
  get lost(): LeaseLostError | undefined {
    return this.standing.loss;
  }

  /** The worker's estimate of `leaseUntil`, on its own clock. */
  get leaseEndEstimate(): number {
    return this.estimatedEnd;
  }

  /** The lease is kept from now on, renewed on its timer: while its handler runs, or waits for a turn. */
  start(): void {
    this.step('start');
    this.beatIn(this.deps.options.heartbeatMs);
  }

  /** Renews now; a failed attempt is retried until one succeeds or the lease is lost. */
  async renew(stage?: string): Promise<Lease> {
    for (;;) {
      this.mustBeHeld('renewed');
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
      await this.standing.changed(this.deps.options.retryMs);
    }
  }

  /**
   * Runs one send. A lease shorter than a send needs (`leaseIsShort`) is renewed first. A send
   * checks the lease before it starts; once started it is on its way, and a loss meanwhile
   * does not cut it at once: the gateway verifies the token itself, so cutting the request
   * would protect nothing and lose its answer. The handler's signal aborts when the last such
   * send has answered, or after `sendGraceMs`.
   */
  async send<T>(run: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const { clock, leaseMs, heartbeatMs } = this.deps.options;
    const { sendTimes } = this.deps;
    this.mustBeHeld('sent');
    const short = () =>
      leaseIsShort({
        leftMs: this.estimatedEnd - clock.now(),
        leaseMs,
        heartbeatMs,
        expectedSendMs: sendTimes.expectedMs,
      });
    // A renewal on its way may be all the send needs; else the keeper's own, without a stage.
    if (short() && this.renewing) await this.renewing.catch(() => {});
    if (short()) await this.renew();
    this.mustBeHeld('sent');
    const signal = this.handlerController.signal;
    this.sendsInFlight += 1;
    const startedAt = clock.now();
    try {
      const answer = await run(signal);
      sendTimes.record(clock.now() - startedAt);
      return answer;
    } finally {
      this.sendsInFlight -= 1;
      if (this.sendsInFlight === 0) {
        if (this.lost) this.abortHandler();
        this.standing.notify();
      }
    }
  }

  /**
   * Reports a refusal of this lease (by the queue, the gateway or the receiver): the lease is
   * lost from this moment, so no estimate of its end can be reported instead; the loss is
   * reported once the refusal is explained (`explain`).
   */
  async refused(refusal: Refusal, during: LossDuring): Promise<LeaseLostError> {
    this.step('refuse', this.standing.lossOf(refusal.reason, during, refusal));
    const explained = await this.explain(refusal);
    return this.lose(this.standing.lossOf(explained.reason, during, explained));
  }

  /** Reports a finish or fail that got no answer while the lease may still have been the worker's. */
  unreachable(during: 'finish' | 'fail' | 'release'): LeaseLostError {
    return this.lose(this.standing.lossOf('queue_unreachable', during));
  }

  /** Reports that the queue took the finish, fail or release (or a release was given up). */
  settled(): void {
    this.step('settle');
  }

  /**
   * The refusal with the reason the job's row gives: a `not_leased` refusal of a `dead` job is
   * `cancelled` when the queue says so. A read that fails leaves the refusal as it was.
   */
  private async explain(refusal: Refusal): Promise<Refusal> {
    if (!mayBeCancelled(refusal)) return refusal;
    const job = await this.deps.renewals.get(this.current.id).catch(() => undefined);
    return withDeadReason(refusal, job);
  }

  /** The worker is stopping and the grace time is over: no more sends, and the handler's signal aborts. */
  abandon(reason: Error): void {
    if (!this.handlerController.signal.aborted) this.handlerController.abort(reason);
  }

  /**
   * The handler is over: renewals stop and the lease is settling (or stays lost). Waits for a
   * renewal and any send still on its way, so their answers count.
   */
  async stop(): Promise<void> {
    this.step('stop');
    while (this.renewing || this.sendsInFlight > 0) await this.standing.changed();
  }

  /** The one place a loss is decided: reported once as a `lost` event, whoever found it. */
  private lose(loss: LeaseLostError): LeaseLostError {
    if (this.standing.state === 'lost') return this.standing.foundAgain(loss);
    this.step('lose', loss);
    this.deps.emit({
      event: 'lost',
      job: loss.jobId,
      token: loss.expected.token,
      during: loss.during,
      reason: loss.reason,
      ...(loss.current ? { current: loss.current } : {}),
      error: loss.message,
    });
    if (this.sendsInFlight === 0) this.abortHandler();
    else this.timer = this.deps.options.timers.setTimer(() => this.abortHandler(), this.deps.options.sendGraceMs);
    return loss;
  }

  /** Moves the lease along the state machine; a held lease's timer stops when it is held no more. */
  private step(step: LeaseStep, loss?: LeaseLostError): void {
    if (this.standing.step(step, loss) === 'held') {
      this.deps.options.timers.clearTimer(this.timer);
      this.timer = undefined;
    }
  }

  private mustBeHeld(what: string): void {
    const loss = this.standing.loss;
    if (loss) throw loss;
    if (what === 'sent' && this.handlerController.signal.aborted) throw this.handlerController.signal.reason;
    if (this.standing.state !== 'held') {
      throw new Error(`The job "${this.current.id}" is over; nothing more is ${what} under its lease.`);
    }
  }

  private renewOnce(stage?: string): Promise<Lease> {
    const attempt = this.attemptRenewal(stage);
    this.renewing = attempt;
    this.arm();
    const answered = (renewed: boolean) => {
      this.renewing = undefined;
      // The next timer renewal: an interval after a success, a quarter of one after a failure.
      this.beatIn(renewed ? this.deps.options.heartbeatMs : this.deps.options.retryMs);
      this.standing.notify();
    };
    attempt.then(
      () => answered(true),
      () => answered(false),
    );
    return attempt;
  }

  private async attemptRenewal(stage: string | undefined): Promise<Lease> {
    const { id, owner, token } = this.current;
    const sentAt = this.deps.options.clock.now();
    let renewed: Lease;
    try {
      renewed = await this.deps.renewals.heartbeat(id, { owner, token });
    } catch (err) {
      const refusal = refusalOf(err);
      if (refusal) {
        this.deps.emit(refusedEvent('renew', id, token, refusal));
        throw await this.refused(refusal, 'renew');
      }
      const error = err instanceof Error ? err.message : String(err);
      this.deps.emit({ event: 'call_failed', op: 'renew', job: id, token, error });
      throw err;
    }
    // A renewal that lands after the loss was decided does not revive the lease.
    if (this.lost) throw this.lost;
    this.current = { ...this.current, leaseUntil: renewed.leaseUntil };
    this.estimatedEnd = estimateLeaseEnd(sentAt, this.deps.options.leaseMs, renewed);
    this.deps.emit({ event: 'renewed', job: id, token, leaseUntil: renewed.leaseUntil, ...(stage ? { stage } : {}) });
    return this.current;
  }

  private beatIn(ms: number): void {
    this.beatAt = this.deps.options.clock.now() + ms;
    this.arm();
  }

  /** Arms the timer for what a held lease waits on next; in any other state it is not touched. */
  private arm(): void {
    if (this.standing.state !== 'held') return;
    this.deps.options.timers.clearTimer(this.timer);
    // No renewal succeeded before the estimated end: the lease must be taken as gone.
    const beatFirst = !this.renewing && this.beatAt < this.estimatedEnd;
    const at = beatFirst ? this.beatAt : this.estimatedEnd;
    this.timer = this.deps.options.timers.setTimer(
      () => {
        this.timer = undefined;
        if (beatFirst) this.renewOnce().catch(() => {});
        else this.lose(this.standing.lossOf('not_renewed', 'renew'));
      },
      Math.max(0, at - this.deps.options.clock.now()),
    );
  }

  private abortHandler(): void {
    this.deps.options.timers.clearTimer(this.timer);
    this.timer = undefined;
    if (!this.handlerController.signal.aborted) this.handlerController.abort(this.lost);
  }
}
