// A point where the code under test waits until the test lets it go: the first caller of
// `wait` is held there, the test learns it arrived, does what it wants meanwhile, then releases it.

export interface Hold {
  /**
   * Where the code under test waits. The first call is held until `release()`; every later call
   * passes at once. Takes and ignores any arguments, so it can be given as a worker's hook
   * (`hooks: { beforeSend: stall.wait }`).
   */
  readonly wait: (...ignored: unknown[]) => Promise<void>;
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
    wait: () => {
      if (taken) return Promise.resolve();
      taken = true;
      arrive();
      return released;
    },
    arrived,
    release: () => letGo(),
  };
}
