// `node dist/bench/finishes.js`: what one `POST /finishes` of several jobs costs the queue process
// against the same finishes sent one request each, side by side in one run on one
// `leasehold queue` child process. Each round holds `size` leases and finishes them `batches`
// times, claiming the next ones in the same requests: once as `size` concurrent
// `POST /jobs/:id/finish` with `next` (what `size` worker slots send today), once as one
// `POST /finishes` with `next`; the rounds alternate the two, and the queue's CPU, statements and
// requests per job are read from the process itself (count-preload.ts).
import { Command } from 'commander';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parsePositiveInt } from '../platform/flags.js';
import { QueueClient } from '../queue/client.js';
import type { Lease } from '../queue/types.js';
import { LEASE_MS } from './library.js';
import { QueueDb } from './measure.js';
import { killAll, startService, type ChildService } from './processes.js';
import { summarize } from './stats.js';

type Variant = 'one by one' | 'batched';

interface Reading {
  variant: Variant;
  jobs: number;
  cpuMs: number;
  statements: number;
  requests: number;
  wallMs: number;
}

const program = new Command('node dist/bench/finishes.js')
  .description('Queue CPU per job: N finishes one request each against one POST /finishes of N, side by side.')
  .option('--db <path-or-url>', 'SQLite file (default: a fresh one in a temporary folder) or postgres:// URL')
  .option('--size <n>', 'finishes per batch: the slots of one worker', parsePositiveInt, 8)
  .option('--batches <n>', 'batches per round and variant', parsePositiveInt, 100)
  .option('--rounds <n>', 'rounds of each variant, alternating', parsePositiveInt, 4)
  .parse();

const options = program.opts<{ db?: string; size: number; batches: number; rounds: number }>();

async function round(client: QueueClient, service: ChildService, variant: Variant, owner: string): Promise<Reading> {
  const { size, batches } = options;
  let leases: Lease[] = await client.claimMany(owner, { max: size, leaseMs: LEASE_MS });
  if (leases.length < size) throw new Error(`expected ${size} claimable jobs for ${owner}, got ${leases.length}`);
  const before = await service.counts();
  const started = performance.now();
  let jobs = 0;
  for (let i = 0; i < batches; i++) {
    if (variant === 'one by one') {
      const answers = await Promise.all(
        leases.map((lease) => client.finishAndClaim(lease.id, { owner, token: lease.token })),
      );
      leases = answers.flatMap((answer) => (answer.next ? [answer.next] : []));
    } else {
      const answer = await client.finishMany(
        owner,
        leases.map((lease) => ({ id: lease.id, token: lease.token })),
        { next: true },
      );
      const refused = answer.results.filter((result) => result instanceof Error);
      if (refused.length > 0) throw refused[0];
      leases = answer.next;
    }
    jobs += size;
    if (leases.length < size) throw new Error(`ran out of jobs after ${jobs} in a round of ${variant}`);
  }
  const wallMs = performance.now() - started;
  const after = await service.counts();
  return {
    variant,
    jobs,
    cpuMs: after.cpuMs - before.cpuMs,
    statements: after.statements - before.statements,
    requests: after.requests - before.requests,
    wallMs,
  };
}

async function main(): Promise<void> {
  const { size, batches, rounds } = options;
  const dir = options.db ? undefined : mkdtempSync(join(tmpdir(), 'leasehold-bench-finishes-'));
  const db = options.db ?? join(dir!, 'queue.sqlite');
  const queue = await QueueDb.open(db);
  const service = await startService('queue (finishes)', 'queue', ['--db', db]);
  const client = new QueueClient(service.url);
  const readings: Reading[] = [];
  try {
    // Every job a round finishes, and the leases it holds at its end, are pending before it starts.
    const perRound = size * (batches + 2);
    for (let r = 0; r < rounds; r++) {
      // Alternate which variant goes first, so neither always runs on a warmer process.
      const order: Variant[] = r % 2 === 0 ? ['one by one', 'batched'] : ['batched', 'one by one'];
      for (const variant of order) {
        await queue.topUp(perRound, `fin-${r}-${variant === 'batched' ? 'b' : 's'}`);
        readings.push(await round(client, service, variant, `w-${r}-${variant === 'batched' ? 'b' : 's'}`));
      }
    }
  } finally {
    client.close();
    await service.stop();
    await queue.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  }
  report(readings, { size, batches, rounds, db: options.db ? 'given database' : 'SQLite file' });
}

function report(readings: Reading[], setup: { size: number; batches: number; rounds: number; db: string }): void {
  const per = (variant: Variant, pick: (r: Reading) => number) =>
    summarize(readings.filter((r) => r.variant === variant).map((r) => pick(r) / r.jobs))?.median ?? Number.NaN;
  console.log(
    `queue process, ${setup.db}: ${setup.rounds} rounds of each, ${setup.batches} x ${setup.size} jobs a round, ` +
      'finishing and claiming the next in the same requests (medians of the rounds)',
  );
  const rows = (['one by one', 'batched'] as const).map((variant) => ({
    variant,
    cpuMsPerJob: per(variant, (r) => r.cpuMs),
    statementsPerJob: per(variant, (r) => r.statements),
    requestsPerJob: per(variant, (r) => r.requests),
    jobsPerSec: 1_000 / per(variant, (r) => r.wallMs),
  }));
  for (const row of rows) {
    const label =
      row.variant === 'batched'
        ? `1 x POST /finishes of ${setup.size}, next`
        : `${setup.size} x POST /jobs/:id/finish, next`;
    console.log(
      `  ${label.padEnd(34)} ${row.cpuMsPerJob.toFixed(3)} CPU ms/job  ${row.statementsPerJob.toFixed(2)} statements/job  ` +
        `${row.requestsPerJob.toFixed(3)} requests/job  ${row.jobsPerSec.toFixed(0)} jobs/s`,
    );
  }
  console.log(`  batched / one by one, CPU per job: ${(rows[1]!.cpuMsPerJob / rows[0]!.cpuMsPerJob).toFixed(2)}`);
}

process.on('exit', killAll);
main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exitCode = 1;
});
