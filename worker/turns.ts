// Turns at the handler: with `prefetch`, a run holds more leases than it runs handlers, and each
// lease waits here, kept alive, for one of `concurrency` turns. A turn is handed on as soon as a
// handler returns, before its finish is answered, so the next job runs while the queue commits
// the last one's finish.

/** Gives the turn back: the next waiting lease gets it. Calling it again does nothing. */
export type Turn = () => void;

export class HandlerTurns {
  private free: number;
  private readonly waiting: Array<(turn: Turn) => void> = [];

  constructor(turns: number) {
    this.free = turns;
  }

  /** Whether a turn is free now: `take` would give one without waiting. */
  get hasFree(): boolean {
    return this.free > 0;
  }

  /**
   * A turn, first come first served; `undefined` when one of `signals` aborts first (the run is
   * stopping, or the lease was lost while it waited). The signals are listened to only while
   * the lease waits: a free turn is taken at once.
   */
  take(...signals: ReadonlyArray<AbortSignal | undefined>): Promise<Turn | undefined> {
    if (signals.some((signal) => signal?.aborted)) return Promise.resolve(undefined);
    if (this.free > 0) {
      this.free -= 1;
      return Promise.resolve(this.turn());
    }
    return new Promise((resolve) => {
      const unlisten = () => {
        for (const signal of signals) signal?.removeEventListener('abort', onAbort);
      };
      const onAbort = () => {
        unlisten();
        const at = this.waiting.indexOf(give);
        if (at >= 0) this.waiting.splice(at, 1);
        resolve(undefined);
      };
      const give = (turn: Turn) => {
        unlisten();
        resolve(turn);
      };
      this.waiting.push(give);
      for (const signal of signals) signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  private turn(): Turn {
    let given = false;
    return () => {
      if (given) return;
      given = true;
      const next = this.waiting.shift();
      if (next) next(this.turn());
      else this.free += 1;
    };
  }
}
