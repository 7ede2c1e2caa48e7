// Group commit: writes that arrive while a transaction is running wait for it, then share the
// next transaction and its one fsync. A short, bounded commit window (PostgreSQL's commit_delay
// with commit_siblings) lets writers answered by the last commit, whose next writes are known
// to be coming, join the next one; a lone writer is never delayed. Each write still gets its
// own answer, and a write refused by a rule (an error thrown before it changed anything) does
// not undo the others. Used by the queue's and the receiver's SQLite stores.

/** A write: what it does inside the transaction, given what the transaction hands it (`C`). */
type Work<C, T> = (context: C) => Promise<T>;

interface Pending<C, K> {
  work: Work<C, unknown>;
  kind: K | undefined;
  resolve(value: unknown): void;
  reject(err: unknown): void;
}

type Outcome = { ok: true; value: unknown } | { ok: false; err: unknown };

/**
 * Runs one whole transaction (retries included), handing `work` its context (`trx`, `now`...).
 * `kinds` are those the transaction's writes were submitted with, so it can begin the kind of
 * transaction they need.
 */
export type RunTransaction<C, K = never> = <T>(work: Work<C, T>, kinds: ReadonlySet<K>) => Promise<T>;

export interface GroupCommitOptions {
  /**
   * True for an error that is a write's refusal thrown before it wrote anything (the queue's
   * `409 stale_lease`, say): it answers that write alone and the batch goes on.
   */
  isRefusal?: (err: unknown) => boolean;
  /** The most writes one transaction takes. */
  maxBatch?: number;
  /**
   * The most writes waiting for a transaction (default 10 000): past it, `submit` rejects at once
   * with CommitQueueFull, which the stores answer as a 503, rather than let the queue grow
   * without bound while the database cannot keep up.
   */
  maxPending?: number;
  /**
   * The longest a transaction waits for writes known to be coming: after a commit that
   * answered several writers, the next transaction waits until as many writes are pending, or
   * this long, whichever is first. 0 turns the window off. Default 2 ms, under one fsync.
   */
  windowMs?: number;
}

/** What the committer has done: the figures behind "transactions per job". */
export interface GroupCommitStats {
  transactions: number;
  writes: number;
  /** Transactions that waited in the commit window, and how many of those ran out of time. */
  windows: number;
  windowTimeouts: number;
}

/** A commit answered this long ago says nothing any more about who is coming back. */
const SIBLINGS_MEMORY_MS = 50;

/** `submit`'s refusal when `maxPending` writes are already waiting: shed load, the caller retries. */
export class CommitQueueFull extends Error {
  static readonly DEFAULT_MAX = 10_000;
  override readonly name = 'CommitQueueFull';
  readonly code = 'COMMIT_QUEUE_FULL';

  constructor(readonly maxPending: number) {
    super(`${maxPending} writes are already waiting for a transaction; this one was refused.`);
  }
}

export class GroupCommitter<C, K = never> {
  private pending: Pending<C, K>[] = [];
  private running = false;
  private readonly isRefusal: (err: unknown) => boolean;
  private readonly maxBatch: number;
  private readonly maxPending: number;
  private readonly windowMs: number;
  /** Writers the last commit answered, and when: the siblings expected back. */
  private siblings = 0;
  private siblingsAt = 0;
  /** Set while a transaction waits in the window: wakes it once enough writes are pending. */
  private wake: (() => void) | undefined;
  private readonly counts: GroupCommitStats = { transactions: 0, writes: 0, windows: 0, windowTimeouts: 0 };

  constructor(
    private readonly runTransaction: RunTransaction<C, K>,
    options: GroupCommitOptions = {},
  ) {
    this.isRefusal = options.isRefusal ?? (() => false);
    this.maxBatch = options.maxBatch ?? 64;
    this.maxPending = options.maxPending ?? CommitQueueFull.DEFAULT_MAX;
    this.windowMs = options.windowMs ?? 2;
  }

  stats(): GroupCommitStats {
    return { ...this.counts };
  }

  /**
   * Resolves with `work`'s result once the transaction it ran in has committed. `kind`, when
   * given, is handed to the transaction (see RunTransaction).
   */
  submit<T>(work: Work<C, T>, kind?: K): Promise<T> {
    if (this.pending.length >= this.maxPending) return Promise.reject(new CommitQueueFull(this.maxPending));
    return new Promise<T>((resolve, reject) => {
      this.pending.push({ work, kind, resolve: resolve as (value: unknown) => void, reject });
      if (this.wake && this.pending.length >= this.expected()) this.wake();
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
        await this.window();
        const batch = this.pending.splice(0, this.maxBatch);
        this.counts.transactions++;
        this.counts.writes += batch.length;
        if (batch.length === 1) await this.runAlone(batch[0]!);
        else await this.runTogether(batch);
        this.siblings = batch.length;
        this.siblingsAt = performance.now();
      }
    } finally {
      this.running = false;
    }
  }

  /** How many writes the next transaction may expect: those the last commit answered, if recent. */
  private expected(): number {
    if (performance.now() - this.siblingsAt > SIBLINGS_MEMORY_MS) return 1;
    return Math.min(this.siblings, this.maxBatch);
  }

  /**
   * The commit window: wait while fewer writes are pending than the last commit answered, at
   * most `windowMs`. A writer alone (the last commit answered one, or none lately) never waits.
   * The next commit then expects as many as actually came, so a window that keeps running out
   * of time shrinks itself away.
   */
  private async window(): Promise<void> {
    if (this.windowMs <= 0 || this.pending.length >= this.expected()) return;
    this.counts.windows++;
    const filled = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), this.windowMs);
      this.wake = () => {
        clearTimeout(timer);
        resolve(true);
      };
    });
    this.wake = undefined;
    if (!filled) this.counts.windowTimeouts++;
  }

  private async runAlone(op: Pending<C, K>): Promise<void> {
    try {
      op.resolve(await this.runTransaction(op.work, kindsOf([op])));
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
  private async runTogether(batch: Pending<C, K>[]): Promise<void> {
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
      }, kindsOf(batch));
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

function kindsOf<K>(batch: ReadonlyArray<{ kind: K | undefined }>): ReadonlySet<K> {
  const kinds = new Set<K>();
  for (const { kind } of batch) if (kind !== undefined) kinds.add(kind);
  return kinds;
}
