// Group commit: writes that arrive while a transaction is running wait for it, then share the
// next transaction and its one fsync. A lone writer is not delayed: with nothing running, its
// transaction starts at once. Each write still gets its own answer, and a write refused by a
// rule (an error thrown before it changed anything) does not undo the others. Used by the
// queue's and the receiver's SQLite stores.

/** A write: what it does inside the transaction, given what the transaction hands it (`C`). */
type Work<C, T> = (context: C) => Promise<T>;

interface Pending<C> {
  work: Work<C, unknown>;
  resolve(value: unknown): void;
  reject(err: unknown): void;
}

type Outcome = { ok: true; value: unknown } | { ok: false; err: unknown };

/** Runs one whole transaction (retries included), handing `work` its context (`trx`, `now`...). */
export type RunTransaction<C> = <T>(work: Work<C, T>) => Promise<T>;

export interface GroupCommitOptions {
  /**
   * True for an error that is a write's refusal thrown before it wrote anything (the queue's
   * `409 stale_lease`, say): it answers that write alone and the batch goes on.
   */
  isRefusal?: (err: unknown) => boolean;
  /** The most writes one transaction takes. */
  maxBatch?: number;
}

export class GroupCommitter<C> {
  private pending: Pending<C>[] = [];
  private running = false;
  private readonly isRefusal: (err: unknown) => boolean;
  private readonly maxBatch: number;

  constructor(
    private readonly runTransaction: RunTransaction<C>,
    options: GroupCommitOptions = {},
  ) {
    this.isRefusal = options.isRefusal ?? (() => false);
    this.maxBatch = options.maxBatch ?? 64;
  }

  /** Resolves with `work`'s result once the transaction it ran in has committed. */
  submit<T>(work: Work<C, T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.pending.push({ work, resolve: resolve as (value: unknown) => void, reject });
      if (!this.running) void this.drain();
    });
  }

  private async drain(): Promise<void> {
    this.running = true;
    try {
      for (let first = true; ; first = false) {
        // Writers answered by the last commit usually come straight back with their next
        // write, some promise steps later, and requests may already be read off their
        // sockets: one turn of the event loop lets them all join the next transaction,
        // however many steps each takes, rather than the quickest starting one alone (which
        // settles into alternating batches of one and of the rest). A write that finds the
        // committer idle runs at once.
        if (!first) await new Promise<void>((resolve) => setImmediate(resolve));
        if (this.pending.length === 0) break;
        const batch = this.pending.splice(0, this.maxBatch);
        if (batch.length === 1) await this.runAlone(batch[0]!);
        else await this.runTogether(batch);
      }
    } finally {
      this.running = false;
    }
  }

  private async runAlone(op: Pending<C>): Promise<void> {
    try {
      op.resolve(await this.runTransaction(op.work));
    } catch (err) {
      op.reject(err);
    }
  }

  /**
   * One transaction for the whole batch. The writes run one after another in it, in the order
   * they arrived, with one context (so one `now` on the queue). A refusal changed nothing: it is that write's answer and the
   * others go on. Any other error fails the transaction; each write is then run alone, so only
   * the one at fault sees it.
   */
  private async runTogether(batch: Pending<C>[]): Promise<void> {
    let outcomes: Outcome[];
    try {
      outcomes = await this.runTransaction(async (context) => {
        const results: Outcome[] = [];
        for (const op of batch) {
          try {
            results.push({ ok: true, value: await op.work(context) });
          } catch (err) {
            if (!this.isRefusal(err)) throw err;
            results.push({ ok: false, err });
          }
        }
        return results;
      });
    } catch {
      for (const op of batch) await this.runAlone(op);
      return;
    }
    // Answers go out only after COMMIT: an acknowledged write is on disk.
    outcomes.forEach((outcome, i) => {
      const op = batch[i]!;
      if (outcome.ok) op.resolve(outcome.value);
      else op.reject(outcome.err);
    });
  }
}
