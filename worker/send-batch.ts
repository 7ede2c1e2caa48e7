// Sends coalesced: while one request to the gateway is on its way, the sends the worker's slots
// make wait for it, then go together in one `POST /sends`, where the gateway checks their leases
// and forwards their effects together too. A lone send is never held back. Each send still gets
// its own answer: its outcome, or the very error `POST /send` would have given it. Aborting a
// send (its lease lost) settles it at once; a batch it rode in goes on for the others, and the
// gateway's own lease check still refuses whatever is stale.
import { GatewayError } from '../gateway/client.js';
import type { SendRequest } from '../gateway/types.js';
import { BODY_LIMIT_BYTES, jsonKeyCount, MAX_JSON_KEYS } from '../platform/json-limits.js';
import { TurnCoalescer } from '../platform/same-turn.js';
import type { EffectSender, SendOutcome } from './types.js';

/** The most sends one request carries: the gateway's limit for POST /sends. */
export const MAX_SEND_BATCH = 100;

/** A batch's body beyond its sends: `{"sends":[…]}`. */
const BATCH_OVERHEAD_BYTES = 16;

interface Pending {
  input: SendRequest;
  /** This send's share of a batch's body, in UTF-8 bytes, and its object keys: measured once it may share one. */
  size?: { bytes: number; keys: number };
  signal: AbortSignal | undefined;
  settled: boolean;
  resolve(outcome: SendOutcome): void;
  reject(err: unknown): void;
}

export class SendCoalescer extends TurnCoalescer<Pending> implements EffectSender {
  constructor(private readonly gateway: EffectSender) {
    super();
  }

  /** Sends one effect; rejects as `GatewayClient.send` would, or with `signal.reason` once aborted. */
  send(input: SendRequest, options: { signal?: AbortSignal } = {}): Promise<SendOutcome> {
    const { signal } = options;
    if (this.gateway.sendMany === undefined || !this.batchRoute) return this.gateway.send(input, options);
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        this.waiting = this.waiting.filter((one) => one !== pending);
        pending.reject(signal!.reason);
      };
      const pending: Pending = {
        input,
        signal,
        settled: false,
        resolve: (outcome) => {
          if (pending.settled) return;
          pending.settled = true;
          signal?.removeEventListener('abort', onAbort);
          resolve(outcome);
        },
        reject: (err) => {
          if (pending.settled) return;
          pending.settled = true;
          signal?.removeEventListener('abort', onAbort);
          reject(err);
        },
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.enqueue(pending);
    });
  }

  /**
   * The oldest waiting sends, up to MAX_SEND_BATCH, as many as fit the gateway's body limits.
   * The oldest always goes: one too large for the limits even alone goes by the single route,
   * and is refused as it would be anyway. A send that waits alone is not measured.
   */
  protected take(): Pending[] {
    if (this.waiting.length === 1) return this.waiting.splice(0);
    const batch: Pending[] = [];
    let bytes = BATCH_OVERHEAD_BYTES;
    let keys = 1;
    while (this.waiting.length > 0 && batch.length < MAX_SEND_BATCH) {
      const next = this.waiting[0]!;
      const size = sizeOf(next);
      const fits = bytes + size.bytes <= BODY_LIMIT_BYTES && keys + size.keys <= MAX_JSON_KEYS;
      if (!fits && batch.length > 0) break;
      this.waiting.shift();
      batch.push(next);
      bytes += size.bytes;
      keys += size.keys;
    }
    return batch;
  }

  /** A lone send goes by the single route, with its own signal. */
  protected async one(pending: Pending): Promise<void> {
    try {
      pending.resolve(await this.gateway.send(pending.input, pending.signal ? { signal: pending.signal } : {}));
    } catch (err) {
      pending.reject(err);
    }
  }

  /**
   * Several sends in one request. No one send's abort cancels it for the rest; it is cancelled
   * only once every send in it was aborted. A request refused whole (a send the gateway finds
   * bad, a gateway without the route) or not answered goes as `unanswered` says; an answer
   * that is not one result per send fails each send, which may or may not have been forwarded.
   */
  protected async many(batch: Pending[]): Promise<void> {
    const cancel = new AbortController();
    let live = batch.length;
    const onAbort = () => {
      if (--live === 0) cancel.abort(new Error('every send of the batch was aborted'));
    };
    for (const pending of batch) pending.signal?.addEventListener('abort', onAbort, { once: true });
    let answers: Array<SendOutcome | Error>;
    try {
      answers = await this.gateway.sendMany!(
        batch.map((pending) => pending.input),
        { signal: cancel.signal },
      );
    } catch (err) {
      if (cancel.signal.aborted) return; // every send was settled by its own abort
      await this.unanswered(batch, err);
      return;
    } finally {
      for (const pending of batch) pending.signal?.removeEventListener('abort', onAbort);
    }
    if (answers.length !== batch.length) {
      const error = new GatewayError(
        'gateway_unavailable',
        `The gateway answered ${answers.length} results to a batch of ${batch.length} sends; each may or may not have been forwarded.`,
      );
      for (const pending of batch) pending.reject(error);
      return;
    }
    batch.forEach((pending, i) => {
      const answer = answers[i]!;
      if (answer instanceof Error) pending.reject(answer);
      else pending.resolve(answer);
    });
  }
}

/** A send's share of a batch, counted as the gateway counts a body (platform/json-limits.ts): its JSON and a comma. */
function sizeOf(pending: Pending): { bytes: number; keys: number } {
  if (pending.size === undefined) {
    const json = Buffer.from(JSON.stringify(pending.input));
    pending.size = { bytes: json.length + 1, keys: jsonKeyCount(json) };
  }
  return pending.size;
}
