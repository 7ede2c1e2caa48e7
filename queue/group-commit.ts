// Group commit: writes that arrive while a transaction is running wait for it, then share the
// next transaction and its one fsync. A lone writer is not delayed: with nothing running, its
// transaction starts at once. Each write still gets its own answer, and a write refused by a
// rule (a QueueError, thrown before it changed anything) does not undo the others.
import type { Knex } from 'knex';
import { QueueError } from './errors.js';

type Work<T> = (trx: Knex.Transaction, now: number) => Promise<T>;

interface Pending {
  work: Work<unknown>;
  resolve(value: unknown): void;
  reject(err: unknown): void;
}

type Outcome = { ok: true; value: unknown } | { ok: false; err: unknown };

/** Runs one whole transaction (retries included) and hands `work` the transaction and `now`. */
export type RunTransaction = <T>(work: Work<T>) => Promise<T>;

export class GroupCommitter {
  private pending: Pending[] = [];
  private running = false;

  constructor(
    private readonly runTransaction: RunTransaction,
    private readonly maxBatch = 64,
  ) {}

  /** Resolves with `work`'s result once the transaction it ran in has committed. */
  submit<T>(work: Work<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.pending.push({ work, resolve: resolve as (value: unknown) => void, reject });
      if (!this.running) void this.drain();
    });
  }

  private async drain(): Promise<void> {
    this.running = true;
    try {
      while (this.pending.length > 0) {
        const batch = this.pending.splice(0, this.maxBatch);
        if (batch.length === 1) await this.runAlone(batch[0]!);
        else await this.runTogether(batch);
      }
    } finally {
      this.running = false;
    }
  }

  private async runAlone(op: Pending): Promise<void> {
    try {
      op.resolve(await this.runTransaction(op.work));
    } catch (err) {
      op.reject(err);
    }
  }

  /**
   * One transaction for the whole batch. The writes run one after another in it, in the order
   * they arrived, with one `now`. A QueueError is a refusal that changed nothing: it is that
   * write's answer and the others go on. Any other error fails the transaction; each write is
   * then run alone, so only the one at fault sees it.
   */
  private async runTogether(batch: Pending[]): Promise<void> {
    let outcomes: Outcome[];
    try {
      outcomes = await this.runTransaction(async (trx, now) => {
        const results: Outcome[] = [];
        for (const op of batch) {
          try {
            results.push({ ok: true, value: await op.work(trx, now) });
          } catch (err) {
            if (!(err instanceof QueueError)) throw err;
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
