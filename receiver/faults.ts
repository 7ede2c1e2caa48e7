// Fault injection for test mode: a queue of faults that the next POST /effects requests take,
// one each, in order — delay the answer, fail before judging, or record and then reset the
// connection. Lets other projects prove their retries are safe against this receiver.
import type { RequestHandler } from 'express';
import { z } from 'zod';
import { parseWith } from '../platform/http-edge.js';
import { ReceiverError } from './errors.js';

/** The most faults queued at once, and the longest delay: a test needs a few, and no stub should hold answers for minutes. */
export const MAX_PENDING_FAULTS = 1_000;
export const MAX_FAULT_DELAY_MS = 60_000;

const count = z.number().int().min(1).max(MAX_PENDING_FAULTS).default(1);
export const faultSchema = z.discriminatedUnion(
  'kind',
  [
    z.object({ kind: z.literal('delay'), ms: z.number().int().min(0).max(MAX_FAULT_DELAY_MS), count }),
    z.object({ kind: z.literal('fail'), status: z.number().int().min(400).max(599).default(503), count }),
    z.object({ kind: z.literal('drop'), count }),
  ],
  { error: 'a fault is {kind: "delay", ms, count?}, {kind: "fail", status?, count?} or {kind: "drop", count?}' },
);

/** What a caller asks for; `count` defaults to 1, `status` to 503. */
export type FaultRequest = z.input<typeof faultSchema>;

/** One pending fault; each is taken by exactly one request. */
export type Fault = { kind: 'delay'; ms: number } | { kind: 'fail'; status: number } | { kind: 'drop' };

export class FaultController {
  private readonly queue: Fault[] = [];
  private readonly timers = new Set<NodeJS.Timeout>();

  /** `enabled: false` makes every call that would add a fault throw: fault injection needs test mode. */
  constructor(private readonly enabled = true) {}

  /** Queues `count` faults of one kind behind those already queued. */
  add(request: FaultRequest): Fault[] {
    if (!this.enabled) {
      throw new Error('Fault injection is off; start the receiver with testMode: true (or --test-mode).');
    }
    const { count: n, ...fault } = parseWith(faultSchema, request, 'fault', ReceiverError.fromEdge);
    if (this.queue.length + n > MAX_PENDING_FAULTS) {
      throw new ReceiverError(
        'invalid_request',
        `At most ${MAX_PENDING_FAULTS} faults may be queued at once; ${this.queue.length} are, so ${n} more would be too many. Clear them (DELETE /admin/faults) or ask for fewer.`,
        { pending: this.queue.length, maxPending: MAX_PENDING_FAULTS },
      );
    }
    for (let i = 0; i < n; i += 1) this.queue.push({ ...fault } as Fault);
    return this.pending();
  }

  /** Holds the answers of the next `count` requests for `ms` (the effect is recorded first). */
  delay(options: { ms: number; count?: number }): Fault[] {
    return this.add({ kind: 'delay', ...options });
  }

  /** Answers the next `count` requests with `status` (default 503) without judging or recording them. */
  fail(options: { status?: number; count?: number } = {}): Fault[] {
    return this.add({ kind: 'fail', ...options });
  }

  /** Judges and records the next `count` requests, then resets the connection instead of answering. */
  drop(options: { count?: number } = {}): Fault[] {
    return this.add({ kind: 'drop', ...options });
  }

  pending(): Fault[] {
    return this.queue.map((fault) => ({ ...fault }));
  }

  /** Forgets queued faults and cancels delayed answers still waiting (their sockets are closed by then). */
  clear(): void {
    this.queue.length = 0;
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
  }

  /** The middleware that hands the next fault to the request it wraps. */
  middleware(): RequestHandler {
    return (req, res, next) => {
      const fault = this.queue.shift();
      if (!fault) return next();
      res.setHeader('Injected-Fault', fault.kind);
      switch (fault.kind) {
        case 'fail':
          return next(
            new ReceiverError(
              'injected_fault',
              `An injected fault failed this request with status ${fault.status} before it was judged; nothing was recorded, so send it again.`,
              {},
              fault.status,
            ),
          );
        case 'delay': {
          // Patch this response only: whatever is sent (an outcome or an error) waits `ms`.
          const send = res.send.bind(res);
          res.send = (body?: unknown) => {
            const timer = setTimeout(() => {
              this.timers.delete(timer);
              send(body);
            }, fault.ms);
            this.timers.add(timer);
            return res;
          };
          return next();
        }
        case 'drop':
          // The effect is committed before anything is sent; then the client gets a TCP reset.
          res.send = () => {
            req.socket.resetAndDestroy();
            return res;
          };
          return next();
      }
    };
  }
}
