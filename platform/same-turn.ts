// The coalescers' one shared wait: a batch leaves in the same turn of the event loop as the call
// that started it, but only once the promise jobs already queued have run, so the calls those
// jobs make (the sends of one `POST /sends`, the slots one answer brought back) go together
// instead of the first alone and the rest after it.

/**
 * Resolves once the promise jobs queued now have run, within the same turn of the event loop: a
 * tick callback queued from a promise job runs when the promise jobs are done. No I/O, no timer.
 */
export function sameTurn(): Promise<void> {
  return new Promise((resolve) => queueMicrotask(() => process.nextTick(resolve)));
}

/**
 * Calls coalesced into batches, one request at a time: a call that finds nothing on its way goes
 * in the same turn (after the turn's promise jobs, so the calls they make join it); those made
 * while a request is on its way wait for it, then go together. A subclass says how a batch is
 * cut from what waits (`take`), and how one call and several are sent (`one`, `many`).
 */
export abstract class TurnCoalescer<P> {
  protected waiting: P[] = [];
  private inFlight = false;

  /** Adds `pending` to what waits, and starts sending unless a request is on its way. */
  protected enqueue(pending: P): void {
    this.waiting.push(pending);
    if (!this.inFlight) {
      this.inFlight = true;
      void this.drain();
    }
  }

  /** The next batch, taken out of `waiting`: never empty while something waits. */
  protected abstract take(): P[];
  protected abstract one(pending: P): Promise<void>;
  protected abstract many(batch: P[]): Promise<void>;

  private async drain(): Promise<void> {
    try {
      for (;;) {
        await sameTurn();
        if (this.waiting.length === 0) break;
        const batch = this.take();
        if (batch.length === 1) await this.one(batch[0]!);
        else await this.many(batch);
      }
    } finally {
      this.inFlight = false;
    }
  }
}
