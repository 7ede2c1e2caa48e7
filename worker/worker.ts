// The worker: claim, run the handler under a kept lease, finish or fail — in a loop that polls
// when the queue is empty and stops cleanly when its signal aborts.
import http from 'node:http';
import { setTimeout as delay } from 'node:timers/promises';
import { GatewayClient } from '../gateway/client.js';
import { QueueClient, QueueError } from '../queue/client.js';
import type { WorkerEventBody } from './events.js';
import { resolveWorkerOptions, type ResolvedWorkerOptions, type WorkerOptions } from './options.js';
import { errorMessage } from './rules.js';
import { runLease } from './run-lease.js';
import type { ClaimedLease, EffectSender, Handler, JobOutcome, QueueApi } from './types.js';

export interface RunOptions {
  /** Abort to stop: no new claims; the job in hand gets `drainMs`, then is handed back. */
  signal?: AbortSignal;
  /** Stop after this many claims (default: no limit). */
  maxJobs?: number;
}

export interface WorkerSummary {
  claimed: number;
  finished: number;
  failed: number;
  lost: number;
}

export class Worker {
  readonly name: string;
  readonly options: ResolvedWorkerOptions;
  private readonly queue: QueueApi;
  private readonly renewals: Pick<QueueApi, 'heartbeat'>;
  private readonly gateway: EffectSender;
  private readonly agent: http.Agent;

  constructor(options: WorkerOptions) {
    this.options = resolveWorkerOptions(options);
    this.name = this.options.name;
    // A connection per request: a worker that was paused (GC, SIGSTOP) must not reuse a
    // kept-alive connection the server has closed in the meantime.
    this.agent = new http.Agent({ keepAlive: false, maxSockets: 16 });
    const queueUrl = this.options.queueUrl.href;
    this.queue = this.options.queue ?? new QueueClient(queueUrl, { agent: this.agent });
    // A renewal that hangs is given up after one interval, so the next attempt starts in time.
    this.renewals =
      this.options.queue ?? new QueueClient(queueUrl, { agent: this.agent, timeoutMs: this.options.heartbeatMs });
    this.gateway = this.options.gateway ?? new GatewayClient(this.options.gatewayUrl.href, { agent: this.agent });
  }

  /** Claims the next job, or returns null when nothing is claimable. */
  async claim(): Promise<ClaimedLease | null> {
    const claimedAt = this.options.clock.now();
    const lease = await this.queue.claim(this.name, this.options.leaseMs);
    if (!lease) return null;
    this.emit({
      event: 'claimed',
      job: lease.id,
      token: lease.token,
      attempt: lease.attempt,
      qty: lease.qty,
      leaseUntil: lease.leaseUntil,
    });
    return { lease, claimedAt };
  }

  /** Runs one claimed job to its outcome: finished, failed, or lost. */
  process(claimed: ClaimedLease, handler: Handler, options: { stopSignal?: AbortSignal } = {}): Promise<JobOutcome> {
    return runLease(claimed, handler, {
      options: this.options,
      queue: this.queue,
      renewals: this.renewals,
      gateway: this.gateway,
      emit: (event) => this.emit(event),
      stopSignal: options.stopSignal,
    });
  }

  /** Claims and runs jobs until `signal` aborts or `maxJobs` have been claimed. */
  async run(handler: Handler, { signal, maxJobs }: RunOptions = {}): Promise<WorkerSummary> {
    const summary: WorkerSummary = { claimed: 0, finished: 0, failed: 0, lost: 0 };
    const onStop = () => this.emit({ event: 'stopping' });
    signal?.addEventListener('abort', onStop, { once: true });
    this.emit({
      event: 'started',
      leaseMs: this.options.leaseMs,
      heartbeatMs: this.options.heartbeatMs,
      pollMs: this.options.pollMs,
    });
    try {
      while (!signal?.aborted && (maxJobs === undefined || summary.claimed < maxJobs)) {
        let claimed: ClaimedLease | null;
        try {
          claimed = await this.claim();
        } catch (err) {
          // An unreachable or failing queue is waited out; a refused request is a mistake to report.
          if (!(err instanceof QueueError) || err.status < 500) throw err;
          this.emit({ event: 'claim_failed', error: errorMessage(err) });
          claimed = null;
        }
        if (!claimed) {
          await delay(this.options.pollMs, undefined, signal ? { signal } : {}).catch(() => {});
          continue;
        }
        summary.claimed += 1;
        const outcome = await this.process(claimed, handler, signal ? { stopSignal: signal } : {});
        summary[outcome.status] += 1;
      }
    } finally {
      signal?.removeEventListener('abort', onStop);
    }
    this.emit({ event: 'stopped', ...summary });
    return summary;
  }

  /** Releases the HTTP connections. */
  close(): void {
    this.agent.destroy();
  }

  private emit(body: WorkerEventBody): void {
    this.options.onEvent({ t: this.options.clock.now(), worker: this.name, ...body });
  }
}

export function createWorker(options: WorkerOptions): Worker {
  return new Worker(options);
}

export interface RunWorkerOptions extends WorkerOptions, RunOptions {
  handler: Handler;
}

/** Runs a worker until `signal` aborts (or `maxJobs`), then closes it. */
export async function runWorker(options: RunWorkerOptions): Promise<WorkerSummary> {
  const worker = createWorker(options);
  try {
    return await worker.run(options.handler, options);
  } finally {
    worker.close();
  }
}
