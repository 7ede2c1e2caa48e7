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
