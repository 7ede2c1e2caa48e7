// Lease checks coalesced: while one check is on its way to the queue, the checks of other sends
// wait for it, then go together in one `POST /verifications`, read by the queue at one instant.
// A lone check is never held back; each send still gets its own answer, or its own refusal.
import type { QueueClient, QueueError } from '../queue/index.js';
import type { Lease } from '../queue/types.js';
import { currentRequestId } from '../platform/request-id.js';
import type { LeaseVerifier } from './send.js';

/** The queue calls a coalescing verifier makes; QueueClient has them. */
export type VerifyApi = Pick<QueueClient, 'verify' | 'verifyMany'>;

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

export class CoalescingVerifier implements LeaseVerifier {
  private waiting: Check[] = [];
  private inFlight = false;
  /** Requests made and checks they carried: the figures behind "lease checks per request". */
  readonly counts = { requests: 0, checks: 0 };

  constructor(private readonly queue: VerifyApi) {}

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

  /** Several checks share one request; no single caller's hang-up may cancel it for the rest. */
  private async many(batch: Check[]): Promise<void> {
    let answers: Array<Lease | QueueError>;
    try {
      // The batch carries the request ids of every send it serves, so each can be followed into the queue's log.
      const requestIds = [...new Set(batch.flatMap((check) => (check.requestId ? [check.requestId] : [])))];
      answers = await this.queue.verifyMany(
        batch.map(({ id, owner, token }) => ({ id, owner, token })),
        { requestId: requestIds.length > 0 ? requestIds.join(',') : undefined },
      );
    } catch (err) {
      for (const check of batch) check.reject(err);
      return;
    }
    batch.forEach((check, i) => {
      const answer = answers[i];
      if (answer === undefined)
        check.reject(new Error(`the queue answered ${answers.length} of ${batch.length} lease checks`));
      else if (answer instanceof Error) check.reject(answer);
      else check.resolve(answer);
    });
  }
}
