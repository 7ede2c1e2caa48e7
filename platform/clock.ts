// The one clock type every service and the worker take: time as epoch milliseconds, injected so
// tests can move it by hand.

/** Anything with a `now()` in epoch ms. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };
