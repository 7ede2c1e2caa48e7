// Forwards coalesced into batches, for a downstream that offers them: while one forward to it is
// on its way, the effects forwarded meanwhile wait for it, then go together in one batch request
// (`{effects: [...]}` to the offered target), which the downstream judges in one transaction. A
// lone effect is never held back: it goes at once, as a single request. Each effect still gets
// its own answer: the one the batch gave it, or the batch's own failure.
import { jsonKeyCount, BODY_LIMIT_BYTES, MAX_JSON_KEYS } from '../platform/http-edge.js';
import type { Exchange } from '../platform/exchange.js';
import { currentRequestId, withRequestId } from '../platform/request-id.js';
import { MAX_BATCH_REQUEST_ID_CHARS } from './verifier.js';
import type { BadBatch, ForwardedEffect, ForwardResult } from './forwarder.js';
import { errorCodeOf } from './rules.js';
import { sameTurn } from '../platform/same-turn.js';

/** The most effects one batch carries: the receiver's limit. */
export const MAX_BATCH_EFFECTS = 100;

/** What the queue sends through: its forwarder's single request, batch request and batch target. */
export interface BatchSender {
  single(effect: ForwardedEffect, token: number, timeoutMs: number, signal?: AbortSignal): Promise<Exchange>;
  batchUrl(): URL | undefined;
  /** One batch request of `size` effects, `body` already serialized, under `requestId` (the sends' ids). */
  batch(target: URL, body: Buffer, size: number, timeoutMs: number, requestId: string | undefined): Promise<Exchange>;
}

interface Entry {
  effect: ForwardedEffect;
  token: number;
  /** The effect as it goes in the batch, `{jobId, key?, qty?, body?, token}`, serialized once. */
  item: string;
  bytes: number;
  keys: number;
  /** When its attempt's time is up (performance.now()), waiting included. */
  deadline: number;
  timeoutMs: number;
  signal: AbortSignal | undefined;
  /** The send's request id, passed on with its effect. */
  requestId: string | undefined;
  settle(result: ForwardResult): void;
}

/** The most ids one X-Request-Id carries, as the services take it. */
const MAX_BATCH_REQUEST_IDS = 100;

/** `{"effects":[` and `]}`; each item after the first adds a comma. */
const ENVELOPE_BYTES = Buffer.byteLength('{"effects":[]}');

/** Statuses of a batch refused as a whole, before anything was judged (protocol refusals). */
const WHOLE_REFUSALS: ReadonlySet<number> = new Set([400, 401, 413, 415]);

export class BatchQueue {
  private waiting: Entry[] = [];
  private inFlight = false;

  constructor(private readonly sender: BatchSender) {}

  forward(effect: ForwardedEffect, token: number, timeoutMs: number, signal?: AbortSignal): Promise<ForwardResult> {
    if (signal?.aborted) return Promise.resolve({ kind: 'aborted' });
    return new Promise<ForwardResult>((resolve) => {
      const item = JSON.stringify({ ...effect, token });
      const bytes = Buffer.from(item);
      let settled = false;
      const onAbort = () => {
        // Waiting, it leaves the queue; in a batch already, the batch goes on and its answer is dropped.
        this.waiting = this.waiting.filter((e) => e !== entry);
        entry.settle({ kind: 'aborted' });
      };
      const entry: Entry = {
        effect,
        token,
        item,
        bytes: bytes.length,
        keys: jsonKeyCount(bytes),
        deadline: performance.now() + timeoutMs,
        timeoutMs,
        signal,
        requestId: currentRequestId(),
        settle: (result) => {
          if (settled) return;
          settled = true;
          signal?.removeEventListener('abort', onAbort);
          resolve(result);
        },
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiting.push(entry);
      if (!this.inFlight) void this.drain();
    });
  }

  /** Answers every waiting effect `aborted`: the gateway is closing. */
  close(): void {
    for (const entry of this.waiting.splice(0)) entry.settle({ kind: 'aborted' });
  }

  private async drain(): Promise<void> {
    this.inFlight = true;
    try {
      // The effects made ready in this turn go together: those one batch of lease checks released.
      await sameTurn();
      while (this.waiting.length > 0) {
        const target = this.sender.batchUrl();
        if (target === undefined) {
          // The downstream no longer offers batches: the waiting go as single requests, together.
          await Promise.all(this.waiting.splice(0).map((entry) => this.alone(entry)));
          continue;
        }
        const batch = this.take();
        if (batch.length === 1) await this.alone(batch[0]!);
        else if (batch.length > 1) await this.many(target, batch);
      }
    } finally {
      this.inFlight = false;
    }
  }

  /**
   * The next batch, in arrival order: as many waiting effects as fit in one request the
   * receiver takes (MAX_BATCH_EFFECTS, 1 MiB, MAX_JSON_KEYS object keys). An effect whose time
   * ran out while it waited is answered `timeout` without being sent.
   */
  private take(): Entry[] {
    const batch: Entry[] = [];
    let bytes = ENVELOPE_BYTES;
    let keys = 1;
    while (this.waiting.length > 0 && batch.length < MAX_BATCH_EFFECTS) {
      const next = this.waiting[0]!;
      if (remainingMs(next) < 1) {
        this.waiting.shift();
        next.settle({ kind: 'timeout', timeoutMs: next.timeoutMs });
        continue;
      }
      const fits = bytes + next.bytes + 1 <= BODY_LIMIT_BYTES && keys + next.keys <= MAX_JSON_KEYS;
      if (!fits && batch.length > 0) break;
      this.waiting.shift();
      batch.push(next);
      bytes += next.bytes + 1;
      keys += next.keys;
    }
    return batch;
  }

  private async alone(entry: Entry): Promise<void> {
    const timeoutMs = Math.floor(remainingMs(entry));
    if (timeoutMs < 1) return entry.settle({ kind: 'timeout', timeoutMs: entry.timeoutMs });
    // Under its own send's request id, whichever send's call is draining the queue.
    const sent = withRequestId(entry.requestId, () =>
      this.sender.single(entry.effect, entry.token, timeoutMs, entry.signal),
    );
    entry.settle(await sent);
  }

  /**
   * One batch request; no single effect's caller may cancel it for the others. Its timeout is
   * the shortest any of its effects has left.
   */
  private async many(target: URL, batch: Entry[]): Promise<void> {
    const body = Buffer.from(`{"effects":[${batch.map((entry) => entry.item).join(',')}]}`);
    const timeoutMs = Math.max(1, Math.floor(Math.min(...batch.map(remainingMs))));
    const result = await this.sender.batch(target, body, batch.length, timeoutMs, batchRequestId(batch));
    const answers = answersOf(result, batch.length);
    if (answers === 'alone') {
      await Promise.all(batch.map((entry) => this.alone(entry)));
      return;
    }
    batch.forEach((entry, i) => entry.settle(answers[i]!));
  }
}

/**
 * The ids of the sends a batch serves, comma-separated, so each can be followed into the
 * downstream's log; when they do not fit, none (the downstream gives the batch one of its own).
 */
function batchRequestId(batch: Entry[]): string | undefined {
  const ids = [...new Set(batch.flatMap((entry) => entry.requestId?.split(',') ?? []))];
  const joined = ids.join(',');
  return ids.length > 0 && ids.length <= MAX_BATCH_REQUEST_IDS && joined.length <= MAX_BATCH_REQUEST_ID_CHARS
    ? joined
    : undefined;
}

function remainingMs(entry: Entry): number {
  return entry.deadline - performance.now();
}

/**
 * Each effect's result out of the batch's answer, in order: its own `{status, body}` from
 * `200 {results}`; the batch's failure (no answer, a 5xx) for each, which each send retries on
 * its own; `alone` for a batch refused as a whole (400, 401, 413, 415 with an error code), so
 * each effect is sent again alone and gets a refusal of its own, if any; and `bad_batch` for any
 * other answer, which cannot be laid at any one effect's door and is never taken for an outcome.
 */
export function answersOf(result: Exchange, size: number): ForwardResult[] | 'alone' {
  const each = (one: ForwardResult) => Array.from({ length: size }, () => one);
  if (result.kind !== 'response' || result.status >= 500) return each(result);
  const { status, body } = result;
  const code = errorCodeOf(body);
  if (status === 200) {
    const results = (body as { results?: unknown } | null | undefined)?.results;
    if (Array.isArray(results) && results.length === size && results.every(isItemAnswer)) {
      return results.map((r) => ({ kind: 'response', status: r.status, headers: {}, body: r.body }));
    }
    return each(bad(status, code, `answered ${status} without one {status, body} result per effect`));
  }
  if (WHOLE_REFUSALS.has(status) && code !== undefined) return 'alone';
  return each(bad(status, code, `answered ${status}${code === undefined ? '' : ` ${code}`}`));
}

function isItemAnswer(value: unknown): value is { status: number; body: unknown } {
  if (typeof value !== 'object' || value === null) return false;
  const { status } = value as { status?: unknown };
  return typeof status === 'number' && Number.isInteger(status) && status >= 100 && status <= 599;
}

function bad(status: number, code: string | undefined, problem: string): BadBatch {
  return { kind: 'bad_batch', status, ...(code === undefined ? {} : { code }), problem };
}
