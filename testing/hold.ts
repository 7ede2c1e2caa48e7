// A point where the code under test waits until the test lets it go: the first caller of
// `wait` is held there, the test learns it arrived, does what it wants meanwhile, then releases it.
// A worker's hook is also let go, failing, when the worker stops: a test that fails before its
// release() still closes.
import { unlessAborted } from '../platform/abort.js';

export interface Hold {
  /**
   * Where the code under test waits. The first call is held until `release()`; every later call
   * passes at once. Takes any arguments, so it can be given as a worker's hook
   * (`hooks: { beforeSend: stall.wait }`), and ignores them but for a signal — an AbortSignal, or
   * an object with one as `signal`, as a worker gives its hooks: when it aborts while the caller
   * is held, the wait ends by throwing its reason. A held hook therefore ends when its worker
   * stops (`close()` included), and the worker hands the lease back at once.
   */
  readonly wait: (...args: unknown[]) => Promise<void>;
  /** Resolves once the first caller is waiting. */
  readonly arrived: Promise<void>;
  /** Lets the held caller go on (and every later one pass). Safe to call twice. */
  release(): void;
}

export function hold(): Hold {
  let arrive!: () => void;
  let letGo!: () => void;
  const arrived = new Promise<void>((resolve) => (arrive = resolve));
  const released = new Promise<void>((resolve) => (letGo = resolve));
  let taken = false;
  return {
    wait: (...args) => {
      if (taken) return Promise.resolve();
      taken = true;
      arrive();
      const signal = signalIn(args);
      return unlessAborted(released, signal, () => {
        throw signal!.reason;
      });
    },
    arrived,
    release: () => letGo(),
  };
}

/** The first AbortSignal among `args`, given alone or as an object's `signal`. */
function signalIn(args: readonly unknown[]): AbortSignal | undefined {
  for (const arg of args) {
    if (arg instanceof AbortSignal) return arg;
    const signal = typeof arg === 'object' && arg !== null ? (arg as { signal?: unknown }).signal : undefined;
    if (signal instanceof AbortSignal) return signal;
  }
  return undefined;
}
