// The coalescers' one shared wait: a batch leaves in the same turn of the event loop as the call
// that started it, but only once the promise jobs already queued have run, so the calls those
// jobs make (the sends of one `POST /sends`, the slots one answer brought back) go together
// instead of the first alone and the rest after it.
import { ServiceError } from './service-error.js';

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
export abstract class TurnCoalescer<P extends { reject(err: unknown): void }> {
  protected waiting: P[] = [];
  private inFlight = false;
  /** False once the peer answered that it has no batch route (a version before it): every call then goes alone. */
  protected batchRoute = true;

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

  /**
   * A batch whose request brought no answers. Refused whole (a 4xx: it cannot be laid at any one
   * call's door, and changed nothing): each call is sent again alone, and a peer without the
   * route at all (`not_found`) gets every call alone from then on. No answer (unreachable, timed
   * out, 5xx): each call may or may not have landed, so each fails with `err`, as its own
   * request would have, and its caller handles that as it handles any call without an answer.
   */
  protected async unanswered(batch: P[], err: unknown): Promise<void> {
    if (err instanceof ServiceError && err.status < 500) {
      if (err.code === 'not_found') this.batchRoute = false;
      await Promise.all(batch.map((pending) => this.one(pending)));
    } else {
      for (const pending of batch) pending.reject(err);
    }
  }

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
