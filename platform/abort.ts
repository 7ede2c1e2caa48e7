// Waiting for work, or for a signal, whichever comes first.

/**
 * `work`'s outcome, or `onAbort()`'s once `signal` aborts first (at once when it already has): a
 * value `onAbort` returns resolves, an error it throws rejects. `work` itself runs on, unwatched
 * but never left with an unhandled rejection; the listener is removed once it settles.
 */
export function unlessAborted<T>(work: Promise<T>, signal: AbortSignal | undefined, onAbort: () => T): Promise<T> {
  if (!signal) return work;
  return new Promise<T>((resolve, reject) => {
    const aborted = () => {
      try {
        resolve(onAbort());
      } catch (err) {
        reject(err);
      }
    };
    work.then(
      (value) => {
        signal.removeEventListener('abort', aborted);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', aborted);
        reject(err);
      },
    );
    if (signal.aborted) aborted();
    else signal.addEventListener('abort', aborted, { once: true });
  });
}
