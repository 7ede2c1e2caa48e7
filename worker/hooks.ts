// The fault-injection hooks as the worker calls them. Each gets the stop's signal, so a hook that
// waits (the test kit's hold()) can end its wait when the worker stops; and none is waited on past
// the grace after a stop, so a hook that never returns cannot keep a stopping worker from handing
// its lease back.
import { unlessAborted } from '../platform/abort.js';
import type { Lease } from '../queue/types.js';
import type { WorkerHooks } from './types.js';

/** The stop and the grace a hook is called under (a lease's run has them; a bare one may not). */
export interface HookSignals {
  stopSignal?: AbortSignal | undefined;
  graceSignal?: AbortSignal | undefined;
}

/** A signal that never aborts: the stop of a lease run without one. */
const NO_STOP = new AbortController().signal;

/**
 * Calls `hook` with the lease and the stop's signal, and waits for it — until the grace after a
 * stop is over, when the wait ends with `abandoned()`. The hook itself is not stopped: whatever it
 * does after that, nothing the worker would have done next is done.
 */
export function runHook(
  hook: WorkerHooks['beforeSend'],
  lease: Lease,
  signals: HookSignals,
  abandoned: () => Error,
): Promise<void> {
  if (!hook) return Promise.resolve();
  const returned = hook(lease, { signal: signals.stopSignal ?? NO_STOP });
  const grace = signals.graceSignal;
  const wait = Promise.resolve(returned);
  // A hook with nothing to wait for (it returned no promise) is not cut short.
  if (!grace || returned === undefined) return wait;
  const giveUp = (): void => {
    throw abandoned();
  };
  // Called once the grace is over already: a hook that settles at once still counts.
  if (grace.aborted) return Promise.race([wait, new Promise<void>((resolve) => setImmediate(resolve)).then(giveUp)]);
  return unlessAborted(wait, grace, giveUp);
}

/**
 * Whether `error` is the stop's own abort: the reason of `stop` once it aborted, or an AbortError
 * it caused (`node:timers/promises` and `fetch` reject with one whose `cause` is the reason). A
 * handler or a hook that ends so gave the job up because the worker is stopping.
 */
export function isStopAbort(error: unknown, stop: AbortSignal | undefined): boolean {
  if (!stop?.aborted) return false;
  if (error === stop.reason) return true;
  return error instanceof Error && error.name === 'AbortError' && error.cause === stop.reason;
}
