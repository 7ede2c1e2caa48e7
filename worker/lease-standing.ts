// Where one lease stands, without a timer or a request: its state on the state machine
// (`nextLeaseState` in rules.ts: claimed, held, settling, then lost or ended), its loss once it
// was refused or lost, and the waits for its next change. The keeper (lease-keeper.ts) moves it
// and does what each move calls for: timers, events, the handler's signal.
import type { Lease } from '../queue/types.js';
import { LeaseLostError, type LossDuring } from './errors.js';
import { nextLeaseState, type LeaseState, type LeaseStep, type Refusal } from './rules.js';

type Standing =
  | { state: Exclude<LeaseState, 'refused' | 'lost'> }
  /** `loss`: as the refusal said it, before the explanation; then as reported. */
  | { state: 'refused' | 'lost'; loss: LeaseLostError };

export class LeaseStanding {
  private standing: Standing = { state: 'claimed' };
  /** Woken at each change: a step, a renewal's answer, the last send's answer. */
  private waiters: Array<() => void> = [];

  /** `lease`: the lease as claimed; renewals change only its `leaseUntil`. */
  constructor(private readonly lease: Pick<Lease, 'id' | 'owner' | 'token'>) {}

  get state(): LeaseState {
    return this.standing.state;
  }

  /** Set from the moment a service refused the lease or the estimate gave up on it. */
  get loss(): LeaseLostError | undefined {
    return 'loss' in this.standing ? this.standing.loss : undefined;
  }

  /**
   * Takes `step` (`refuse` and `lose` with their loss): the state it left, or undefined when
   * the step left it where it was. A step the state machine does not take is a defect in the worker.
   */
  step(step: LeaseStep, loss?: LeaseLostError): LeaseState | undefined {
    const from = this.standing.state;
    const to = nextLeaseState(from, step);
    if (to === undefined) throw new Error(`A ${from} lease on job "${this.lease.id}" cannot take the step ${step}.`);
    if (to === from) return undefined;
    this.standing = to === 'lost' || to === 'refused' ? { state: to, loss: loss! } : { state: to };
    this.notify();
    return from;
  }

  /**
   * A loss found once the lease is lost already: the queue's refusal explains a loss first
   * noticed by the clock better, so its words are kept. The loss as it stands.
   */
  foundAgain(loss: LeaseLostError): LeaseLostError {
    if (this.standing.state !== 'lost') throw new Error(`The lease on job "${this.lease.id}" is not lost yet.`);
    if (!this.standing.loss.confirmed && loss.confirmed) this.standing.loss = loss;
    return this.standing.loss;
  }

  lossOf(reason: LeaseLostError['reason'], during: LossDuring, refusal?: Refusal): LeaseLostError {
    const { id, owner, token } = this.lease;
    return new LeaseLostError({
      jobId: id,
      expected: { owner, token },
      during,
      reason,
      current: refusal?.current,
      cause: refusal?.message,
    });
  }

  /** Resolves at the next change, or after `ms` of real time (a retry's pause, as a request's timeout is). */
  changed(ms?: number): Promise<void> {
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        this.waiters = this.waiters.filter((waiter) => waiter !== wake);
        resolve();
      };
      const timer = ms === undefined ? undefined : setTimeout(wake, ms);
      this.waiters.push(wake);
    });
  }

  /** Wakes whoever waits for a change. */
  notify(): void {
    for (const wake of this.waiters.splice(0)) wake();
  }
}
