// Lease checks coalesced: while one check is on its way to the queue, the checks of other sends
// wait for it, then go together in one `POST /verifications`, which the queue reads in one statement.
// A lone check is never held back; each send still gets its own answer, or its own refusal: a
// batch the queue refuses as a whole is asked again one check at a time, so no send's input can
// fail another's check.
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { QueueError, type QueueClient } from '../queue/client.js';
import type { Lease } from '../queue/types.js';
import { currentRequestId, withRequestId } from '../platform/request-id.js';
import type { LeaseVerifier } from './send.js';
import { sameTurn } from '../platform/same-turn.js';
import { timed } from '../platform/metrics.js';

/** The queue calls a coalescing verifier makes; QueueClient has them. */
export type VerifyApi = Pick<QueueClient, 'verify' | 'verifyMany'>;

/** `api`, telling `observe` how long each of its calls took, in seconds, whatever the outcome. */
export function timedVerifyApi(api: VerifyApi, observe: (seconds: number) => void): VerifyApi {
  return {
    verify: (...args) => timed(() => api.verify(...args), observe),
    verifyMany: (...args) => timed(() => api.verifyMany(...args), observe),
  };
}

interface Check {
  id: string;
  owner: string;
  token: number;
  signal: AbortSignal | undefined;
  /** The send's request id, passed on to the queue with the check. */
  requestId: string | undefined;
  resolve(lease: Lease): void;
  reject(err: unknown): void;
}

/** The most checks one request carries: the queue's limit for POST /verifications. */
const MAX_BATCH = 100;

/**
 * The longest X-Request-Id a batch carries, its sends' ids joined: far below a server's header
 * limit (Node's is 16 KiB for all headers), whatever ids the sends came with.
 */
export const MAX_BATCH_REQUEST_ID_CHARS = 4096;
/** The most ids a queue takes in one X-Request-Id. */
const MAX_BATCH_REQUEST_IDS = 100;

export class CoalescingVerifier implements LeaseVerifier {
  private waiting: Check[] = [];
  private inFlight = false;
  /** Requests made and checks they carried: the figures behind "lease checks per request". */
  readonly counts = { requests: 0, checks: 0 };

  /** `logger` records, for a batch sent under an id of its own, which sends it served. */
  constructor(
    private readonly queue: VerifyApi,
    private readonly logger?: Pick<Logger, 'info'>,
  ) {}

  verify(id: string, input: { owner: string; token: number }, options: { signal?: AbortSignal } = {}): Promise<Lease> {
    const { signal } = options;
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise<Lease>((resolve, reject) => {
      const onAbort = () => {
        // The check may already be on its way; its answer is then dropped.
        this.waiting = this.waiting.filter((c) => c !== check);
        reject(signal?.reason);
      };
      const settle = () => signal?.removeEventListener('abort', onAbort);
      const check: Check = {
        id,
        owner: input.owner,
        token: input.token,
        signal,
        requestId: currentRequestId(),
        resolve: (lease) => {
          settle();
          resolve(lease);
        },
        reject: (err) => {
          settle();
          reject(err);
        },
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiting.push(check);
      if (!this.inFlight) void this.drain();
    });
  }

  private async drain(): Promise<void> {
    this.inFlight = true;
    try {
      // The checks made in this turn go together: the sends of one POST /sends, or those one answer released.
      await sameTurn();
      while (this.waiting.length > 0) {
        const batch = this.waiting.splice(0, MAX_BATCH);
        this.counts.requests += 1;
        this.counts.checks += batch.length;
        if (batch.length === 1) await this.one(batch[0]!);
        else await this.many(batch);
      }
    } finally {
      this.inFlight = false;
    }
  }

  /** A lone check goes as the plain verify, with its caller's signal. */
  private async one(check: Check): Promise<void> {
    try {
      const input = { owner: check.owner, token: check.token };
      check.resolve(await this.queue.verify(check.id, input, { signal: check.signal, requestId: check.requestId }));
    } catch (err) {
      check.reject(err);
    }
  }

  /**
   * Several checks share one request; no single caller's hang-up may cancel it for the rest.
   * An answer that is not one answer per check (the request refused as a whole: a 4xx, a 431 for
   * its headers, a body that is not the protocol's) cannot be laid at any one check's door, so
   * each check without its answer is asked again alone. Only a queue that could not be reached
   * fails them all at once: asking again one by one would fail the same way, only slower.
   */
  private async many(batch: Check[]): Promise<void> {
    let answers: Array<Lease | QueueError>;
    try {
      answers = await this.queue.verifyMany(
        batch.map(({ id, owner, token }) => ({ id, owner, token })),
        { requestId: this.batchRequestId(batch) },
      );
    } catch (err) {
      if (err instanceof QueueError && err.code === 'queue_unavailable') {
        for (const check of batch) check.reject(err);
        return;
      }
      answers = [];
    }
    const alone: Check[] = [];
    batch.forEach((check, i) => {
      const answer = answers[i];
      if (answer === undefined || answers.length !== batch.length) alone.push(check);
      else if (answer instanceof Error) check.reject(answer);
      else check.resolve(answer);
    });
    this.counts.requests += alone.length;
    await Promise.all(alone.map((check) => this.one(check)));
  }

  /**
   * The batch carries the request ids of every send it serves, so each can be followed into the
   * queue's log, when they fit in MAX_BATCH_REQUEST_ID_CHARS; otherwise an id of its own, and
   * each send's log says which batch its check went in.
   */
  private batchRequestId(batch: Check[]): string | undefined {
    const ids = [...new Set(batch.flatMap((check) => check.requestId?.split(',') ?? []))];
    if (ids.length === 0) return undefined;
    const joined = ids.join(',');
    if (ids.length <= MAX_BATCH_REQUEST_IDS && joined.length <= MAX_BATCH_REQUEST_ID_CHARS) return joined;
    const batchId = `batch-${randomUUID()}`;
    for (const check of batch) {
      withRequestId(check.requestId, () => this.logger?.info({ batch: batchId }, 'lease check sent in a batch'));
    }
    return batchId;
  }
}
