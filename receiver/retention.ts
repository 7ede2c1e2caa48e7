// Journal retention: prunes journal entries older than a duration, once at start and then
// periodically, each prune in small batches. Effects, and with them each job's highest token,
// are never pruned: forgetting a highest token would let a stale token through.
import type { Logger } from 'pino';
import type { Clock } from './rules.js';
import type { EffectStore } from './store.js';

const MIN_PRUNE_INTERVAL_MS = 1_000;
const MAX_PRUNE_INTERVAL_MS = 60 * 60_000;

/**
 * A tenth of the retention, between 1 s and 1 h: an entry outlives the retention by at most
 * that much, and a prune finds about a tenth of the journal to delete.
 */
export function pruneIntervalMs(retainMs: number): number {
  return Math.min(MAX_PRUNE_INTERVAL_MS, Math.max(MIN_PRUNE_INTERVAL_MS, Math.floor(retainMs / 10)));
}

export interface JournalRetentionOptions {
  retainMs: number;
  clock: Clock;
  logger: Logger;
}

export interface JournalRetention {
  /** Stops pruning; resolves once a prune in flight has stopped, between two batches. */
  stop(): Promise<void>;
}

/** Starts pruning `store`'s journal now and every `pruneIntervalMs(retainMs)`. */
export function retainJournal(store: EffectStore<unknown>, options: JournalRetentionOptions): JournalRetention {
  const { retainMs, clock, logger } = options;
  const stopping = new AbortController();
  let running: Promise<void> | undefined;
  const prune = () => {
    // One prune at a time: a slow one (a large backlog) is not joined by the next tick's.
    if (running) return;
    running = store
      .pruneJournal(clock.now() - retainMs, { signal: stopping.signal })
      .then((pruned) => {
        if (pruned > 0) logger.info({ pruned, retainMs }, 'journal pruned');
      })
      // A busy or unreachable database only delays pruning to the next tick; it never stops the receiver.
      .catch((err: unknown) => logger.warn({ err }, 'journal prune failed; it is tried again at the next interval'))
      .finally(() => {
        running = undefined;
      });
  };
  prune();
  const timer = setInterval(prune, pruneIntervalMs(retainMs));
  timer.unref();
  return {
    stop: async () => {
      clearInterval(timer);
      stopping.abort();
      await running;
    },
  };
}
