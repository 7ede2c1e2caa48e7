// The test kit's manual clock: time stands still until the test moves it, and timers set on it
// (the worker's renewals and its estimate of a lease's end) fire when it is moved past them.
import type { SchedulingClock, TimerHandle } from '../platform/clock.js';
import { describeValue } from '../platform/describe-value.js';

interface Timer {
  due: number;
  /** Order of setting: timers due at the same instant fire in the order they were set. */
  seq: number;
  callback: () => void;
}

/** At most this many timers fire in one `advance`: more means a timer that keeps re-arming itself at 0 ms. */
const MAX_FIRINGS = 100_000;

export class ManualClock implements SchedulingClock {
  /** Time moves only by `advance`. */
  readonly manual = true;
  private current: number;
  private readonly timers = new Map<number, Timer>();
  private nextSeq = 1;

  /** Starts at `startMs` (epoch ms; default: the real time now). */
  constructor(startMs: number = Date.now()) {
    if (!Number.isSafeInteger(startMs) || startMs < 0) {
      throw new RangeError(`A manual clock starts at a whole number of epoch milliseconds, not ${String(startMs)}.`);
    }
    this.current = startMs;
  }

  now(): number {
    return this.current;
  }

  /**
   * Moves the clock `ms` forward at once, as if the whole process had been paused that long:
   * then every timer that fell due meanwhile fires, late, in the order it was due. A lease
   * renewed every 10 s therefore lapses when the test advances 30 s in one call; advance in steps
   * shorter than the renewal interval to let renewals keep it. Returns the new `now()`.
   */
  advance(ms: number): number {
    if (typeof ms !== 'number') {
      throw new TypeError(`advance takes a whole, non-negative number of milliseconds, not ${describeValue(ms)}.`);
    }
    if (!Number.isSafeInteger(ms) || ms < 0 || !Number.isSafeInteger(this.current + ms)) {
      throw new RangeError(`advance takes a whole, non-negative number of milliseconds, not ${String(ms)}.`);
    }
    this.current += ms;
    const failures: unknown[] = [];
    for (let fired = 0; ; fired++) {
      const next = this.nextDue();
      if (!next) break;
      if (fired === MAX_FIRINGS) {
        throw new Error(`advance(${ms}) fired ${MAX_FIRINGS} timers: a timer keeps setting itself again at 0 ms.`);
      }
      this.timers.delete(next[0]);
      try {
        next[1].callback();
      } catch (err) {
        failures.push(err);
      }
    }
    // A timer's callback that throws would crash the process from setTimeout; here the test sees it.
    if (failures.length > 0) throw failures[0];
    return this.current;
  }

  /** How many timers are set and have not fired. */
  get pendingTimers(): number {
    return this.timers.size;
  }

  setTimer(callback: () => void, ms: number): TimerHandle {
    const seq = this.nextSeq++;
    this.timers.set(seq, { due: this.current + Math.max(0, Math.floor(ms)), seq, callback });
    return seq;
  }

  clearTimer(handle: TimerHandle | undefined): void {
    if (typeof handle === 'number') this.timers.delete(handle);
  }

  private nextDue(): [number, Timer] | undefined {
    let best: [number, Timer] | undefined;
    for (const entry of this.timers) {
      const timer = entry[1];
      if (timer.due > this.current) continue;
      if (!best || timer.due < best[1].due || (timer.due === best[1].due && timer.seq < best[1].seq)) best = entry;
    }
    return best;
  }
}
