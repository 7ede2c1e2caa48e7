// Finishes coalesced: while one finish is on its way to the queue, the finishes other slots make
// wait for it, then go together in one `POST /finishes`, each claiming its slot's next job when
// the slot wants one. A lone finish is never held back. Each slot still gets its own answer: its
// job and next lease, or the very refusal the single route would have given it. A request
// carries only as many finishes as the queue's limits on a body's bytes and keys hold, counted
// from the sizes of the results, which the caller measured when it checked them (no result is
// serialized twice).
import { QueueError } from '../queue/client.js';
import { BODY_LIMIT_BYTES, MAX_JSON_DEPTH, MAX_JSON_KEYS } from '../platform/json-limits.js';
import { TurnCoalescer } from '../platform/same-turn.js';
import type { Job, Lease } from '../queue/types.js';
import type { QueueApi } from './types.js';

/** The queue calls a coalescer makes; QueueClient has them (`finishMany` may be missing from a replacement). */
export type FinishApi = Pick<QueueApi, 'finish' | 'finishAndClaim' | 'finishMany'>;

export interface FinishInput {
  owner: string;
  token: number;
  result?: unknown;
}

/** A result as a finish carries it, serialized as JSON: what the queue's limits count. */
export interface ResultSize {
  /** UTF-8 bytes (0 without a result). */
  bytes: number;
  /** Object keys, all its objects together. */
  keys: number;
  /** Nesting of objects and arrays: `{"a":1}` is 1 deep, a string 0. */
  depth: number;
}

export interface FinishAnswer {
  job: Job;
  /** The next lease claimed in the same request; null when none was asked for or none was claimable. */
  next: Lease | null;
}

interface Pending {
  id: string;
  input: FinishInput;
  claimNext: boolean;
  /** This finish's share of a batch's body: its result serialized, its id and token, in UTF-8 bytes. */
  bytes: number;
  /** Its share of the batch's object keys: its result's and its own. */
  keys: number;
  /** Whether its result is shallow enough to travel inside a batch (three levels below the body's top). */
  shallow: boolean;
  resolve(answer: FinishAnswer): void;
  reject(err: unknown): void;
}

/** The most finishes one request carries: the queue's limit for POST /finishes. */
export const MAX_FINISH_BATCH = 100;

/** The queue's limit on a request body, 1 MiB: every service's (platform/json-limits.ts). */
export const QUEUE_BODY_LIMIT_BYTES = BODY_LIMIT_BYTES;

/**
 * A finish in a batch's body beyond its result: `{"id":…,"token":…,"result":…},` with a token
 * of up to 16 digits, around the id's own bytes.
 */
const FINISH_OVERHEAD_BYTES = 48;

/** A batch's body beyond its finishes: `{"owner":…,"finishes":[…],"next":{"leaseMs":…}}`, around the owner's bytes. */
const BATCH_OVERHEAD_BYTES = 64;

/** The keys of a finish in a batch beyond its result's (`id`, `token`, `result`), and of the batch's body (`owner`, `finishes`, `next`, `leaseMs`). */
const FINISH_OVERHEAD_KEYS = 3;
const BATCH_OVERHEAD_KEYS = 4;

/** A result sits three levels down in a batch's body: `{"finishes":[{"result":…}]}`. */
const BATCH_RESULT_LEVELS = 3;

/** `value` serialized as JSON, in UTF-8 bytes. */
function jsonBytes(value: string): number {
  return Buffer.byteLength(JSON.stringify(value));
}

/**
 * Each request leaves in the same turn of the event loop as the finish that started it, once the
 * promise jobs already queued have run (TurnCoalescer): the slots whose jobs one answer brought
 * back finish in those jobs, and go together instead of the first alone and the rest after it.
 */
export class FinishCoalescer extends TurnCoalescer<Pending> {
  /** `leaseMs`: how long each next lease is asked for. */
  constructor(
    private readonly queue: FinishApi,
    private readonly leaseMs: number,
  ) {
    super();
  }

  /**
   * Finishes `id`; with `claimNext`, claims the next job for the same owner in the same request.
   * `result` is the size of `input.result` serialized as JSON (zeros without a result): what the
   * finish adds to a batch's body. Rejects as the single route would: a refusal with its
   * QueueError, no answer with the error that says so — the caller's retries and its reading of
   * a refusal stay its own.
   */
  finish(id: string, input: FinishInput, claimNext: boolean, result: ResultSize): Promise<FinishAnswer> {
    // A queue API without the batched route (a test's replacement): every finish on its own.
    if (this.queue.finishMany === undefined || !this.batchRoute) {
      return this.single(id, input, claimNext);
    }
    return new Promise((resolve, reject) => {
      const bytes = result.bytes + jsonBytes(id) + FINISH_OVERHEAD_BYTES;
      const keys = result.keys + FINISH_OVERHEAD_KEYS;
      const shallow = result.depth + BATCH_RESULT_LEVELS <= MAX_JSON_DEPTH;
      this.enqueue({ id, input, claimNext, bytes, keys, shallow, resolve, reject });
    });
  }

  /**
   * The oldest waiting finish and, up to MAX_FINISH_BATCH, those waiting behind it that one
   * request can carry with it: the same owner, the same choice of claiming a next job (the
   * route asks that of the whole request), and room left under the queue's limits on a body's
   * bytes and keys. A result too deep to travel inside a batch goes alone. The others keep their
   * place for the next request. The oldest always goes: one too large for the limits even alone
   * goes alone, by the single route, and is refused as it would be anyway.
   */
  protected take(): Pending[] {
    const first = this.waiting[0]!;
    const batch: Pending[] = [];
    const rest: Pending[] = [];
    let bytes = BATCH_OVERHEAD_BYTES + jsonBytes(first.input.owner);
    let keys = BATCH_OVERHEAD_KEYS;
    for (const pending of this.waiting) {
      const fits =
        pending === first ||
        (batch.length < MAX_FINISH_BATCH &&
          first.shallow &&
          pending.shallow &&
          pending.input.owner === first.input.owner &&
          pending.claimNext === first.claimNext &&
          bytes + pending.bytes <= QUEUE_BODY_LIMIT_BYTES &&
          keys + pending.keys <= MAX_JSON_KEYS);
      if (fits) {
        bytes += pending.bytes;
        keys += pending.keys;
      }
      (fits ? batch : rest).push(pending);
    }
    this.waiting = rest;
    return batch;
  }

  /** A lone finish goes by the single route, as it did before there were batches. */
  protected async one(pending: Pending): Promise<void> {
    try {
      pending.resolve(await this.single(pending.id, pending.input, pending.claimNext));
    } catch (err) {
      pending.reject(err);
    }
  }

  private single(id: string, input: FinishInput, claimNext: boolean): Promise<FinishAnswer> {
    return claimNext
      ? this.queue.finishAndClaim(id, input, { leaseMs: this.leaseMs })
      : this.queue.finish(id, input).then((job) => ({ job, next: null }));
  }

  /**
   * Several finishes in one request. Each gets its own result; a next lease goes to each
   * accepted finish in turn (a refused one claims nothing). A request refused whole (its shape,
   * its size should a result's have been misjudged) or not answered goes as `unanswered` says;
   * an answer that is not one result per finish fails each finish, which may or may not have
   * landed, and its caller retries it as it retries any finish without an answer.
   */
  protected async many(batch: Pending[]): Promise<void> {
    const { owner } = batch[0]!.input;
    const finishes = batch.map(({ id, input }) =>
      input.result === undefined ? { id, token: input.token } : { id, token: input.token, result: input.result },
    );
    const claimNext = batch[0]!.claimNext;
    let answer: { results: Array<Job | QueueError>; next: Lease[] };
    try {
      answer = await this.queue.finishMany!(owner, finishes, claimNext ? { next: { leaseMs: this.leaseMs } } : {});
    } catch (err) {
      await this.unanswered(batch, err);
      return;
    }
    if (answer.results.length !== batch.length) {
      const error = new QueueError(
        'queue_unavailable',
        `The queue answered ${answer.results.length} results to a batch of ${batch.length} finishes; each may or may not have been applied.`,
      );
      for (const pending of batch) pending.reject(error);
      return;
    }
    const leases = answer.next.values();
    batch.forEach((pending, i) => {
      const result = answer.results[i]!;
      if (result instanceof QueueError) pending.reject(result);
      else pending.resolve({ job: result, next: claimNext ? (leases.next().value ?? null) : null });
    });
  }
}
