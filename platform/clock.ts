// The one clock type every service and the worker take: time as epoch milliseconds, injected so
// tests can move it by hand. A clock may also run timers on its own time (the test kit's manual
// clock); code that schedules on a clock asks `timersOf` for them.
import { describeValue } from './describe-value.js';

/** Anything with a `now()` in epoch ms. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/**
 * `clock` when it has a `now()`, the system's clock when it is left out. Checked where options are
 * read: a clock without `now()` would fail every request it was asked for the time.
 */
export function checkClock(clock: unknown): Clock {
  if (clock === undefined) return systemClock;
  if (typeof clock !== 'object' || clock === null || typeof (clock as Partial<Clock>).now !== 'function') {
    throw new TypeError(`clock must be an object with a now() method, not ${describeValue(clock)}.`);
  }
  return clock as Clock;
}

/** What a timer set on a clock is called by when it is cleared. */
export type TimerHandle = object | number;

/** Timers that run on a clock's time: `ms` from its `now()`. */
export interface Timers {
  setTimer(callback: () => void, ms: number): TimerHandle;
  clearTimer(handle: TimerHandle | undefined): void;
}

/** A clock that runs timers too: a timer set on it fires when its own time reaches the due time. */
export interface SchedulingClock extends Clock, Timers {}

export const systemTimers: Timers = {
  setTimer: (callback, ms) => setTimeout(callback, ms),
  clearTimer: (handle) => clearTimeout(handle as NodeJS.Timeout | undefined),
};

/** The clock's own timers when it has them, Node's otherwise. */
export function timersOf(clock: Clock): Timers {
  const scheduling = clock as Partial<SchedulingClock>;
  return typeof scheduling.setTimer === 'function' && typeof scheduling.clearTimer === 'function'
    ? (scheduling as SchedulingClock)
    : systemTimers;
}
