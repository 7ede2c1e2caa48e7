// BullMQ in the peer columns, as a team runs it: a Queue and a Worker (`concurrency` jobs at
// once, in the benchmark process) on the redis-server of redis.ts. The bare cycle's processor
// does nothing; the idempotency-key reference's POSTs each job's effect to the service of
// idempotency-service.ts with `Idempotency-Key: <job id>`. Between slices the worker is paused.
import http from 'node:http';
import { Queue, Worker, type Job } from 'bullmq';
import { localCounts, meters, processCpu, serviceCounts, sqliteCommits, type Meter } from '../meters.js';
import type { ChildService } from '../processes.js';
import type { ThroughputProbe } from '../library.js';
import type { RedisServer } from './redis.js';
import { Tally, windowProbe } from './window.js';

export interface BullmqColumn {
  redis: RedisServer;
  concurrency: number;
  label: string;
  /** The idempotency-key service, and its SQLite file (for its commits), to send each effect to. */
  downstream?: { service: ChildService; db: string; journal: 'delete' | 'wal' };
}

const ADD_CHUNK = 500;

export async function openBullmqProbe(column: BullmqColumn): Promise<ThroughputProbe> {
  const { redis, concurrency, label, downstream } = column;
  const connection = { host: '127.0.0.1', port: redis.port, maxRetriesPerRequest: null };
  const queue = new Queue(label, { connection });
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency * 2 });
  const send = downstream ? effectSender(downstream.service.url, agent) : undefined;
  const tally = new Tally();
  const worker = new Worker(
    label,
    async (job: Job<{ qty: number }>) => {
      if (send) await send(job.id!, job.data.qty);
    },
    { connection, concurrency, autorun: false },
  );
  worker.on('active', () => tally.started());
  worker.on('completed', () => tally.ended());
  worker.on('failed', (_job, err) => tally.ended(err));
  worker.on('error', (err) => (tally.failures.first ??= err.message));
  let running = false;
  const parts: Meter[] = [
    localCounts(false, 'BullMQ worker (benchmark process)'),
    processCpu(() => [redis.pid], 'redis-server'),
  ];
  if (downstream) {
    parts.push(serviceCounts(downstream.service, 'idempotency service'));
    parts.push(sqliteCommits(downstream.db, downstream.journal));
  }
  return windowProbe(
    {
      topUp: async (pending) => {
        let missing = pending - (await queue.getWaitingCount());
        while (missing > 0) {
          const count = Math.min(missing, ADD_CHUNK);
          await queue.addBulk(Array.from({ length: count }, () => ({ name: 'job', data: { qty: 1 } })));
          missing -= count;
        }
      },
      go: async () => {
        if (running) return worker.resume();
        running = true;
        void worker.run().catch((err: unknown) => (tally.failures.first ??= String(err)));
      },
      halt: async () => {
        await worker.pause();
        await tally.settled();
      },
      get completed() {
        return tally.completed;
      },
      get failures() {
        return tally.failures;
      },
      meter: meters(...parts),
      peaks: () => ({ 'redis-server': redis.peakRssMiB() }),
      close: async () => {
        await worker.close();
        await queue.close();
        agent.destroy();
      },
    },
    concurrency > 1 ? 8 : 2,
  );
}

/** POST /effects with the job's key; anything but 200 (seen) or 201 (recorded) is an error. */
function effectSender(baseUrl: string, agent: http.Agent): (key: string, qty: number) => Promise<void> {
  const url = new URL('/effects', baseUrl);
  return (key, qty) =>
    new Promise((resolve, reject) => {
      const body = JSON.stringify({ job: key, qty });
      const req = http.request(
        url,
        {
          method: 'POST',
          agent,
          headers: {
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(body),
            'idempotency-key': key,
          },
        },
        (res) => {
          res.resume();
          res.on('end', () =>
            res.statusCode === 200 || res.statusCode === 201
              ? resolve()
              : reject(new Error(`the idempotency service answered ${res.statusCode}`)),
          );
        },
      );
      req.on('error', reject);
      req.end(body);
    });
}
