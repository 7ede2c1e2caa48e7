// graphile-worker in the peer columns, as a team runs it: `run()` with `concurrency` workers in
// the benchmark process, on the local PostgreSQL in a schema of the run's own (dropped after), a
// task that does nothing. Between slices its jobs are parked: added with a far `run_at` (its own
// `add_jobs`), let go with `rescheduleJobs` and a nudge on its `jobs:insert` channel (what its
// own `add_job` sends, so idle workers look at once rather than at their next poll), and parked
// again when the window closes.
import { randomBytes } from 'node:crypto';
import { Logger, makeWorkerUtils, run, type Job, type Runner, type WorkerUtils } from 'graphile-worker';
// The callbacks are typed with pg's own types, so the file type-checks however graphile-worker's
// declarations reach pg's.
import type { PoolClient } from 'pg';
import { localCounts, meters, postgresServerCpu } from '../meters.js';
import type { ThroughputProbe } from '../library.js';
import { Tally, windowProbe } from './window.js';

export interface GraphileColumn {
  /** A PostgreSQL server's URL (`postgres://...`); the probe makes its own schema on it. */
  url: string;
  concurrency: number;
  label: string;
}

/** Parked jobs are due in about 30 years. */
const PARKED_AT = () => new Date(Date.now() + 1_000_000_000_000);

/**
 * One schema for every graphile-worker column of a run, migrated once: a second schema's
 * migration would be announced on graphile's `worker:migrate` channel, which every running
 * worker on the server hears and stops for. The columns keep apart by task name.
 */
let shared: { url: string; schema: string; utils: Promise<WorkerUtils>; users: number } | undefined;

function sharedSchema(url: string, logger: Logger): { schema: string; utils: Promise<WorkerUtils> } {
  if (shared && shared.url !== url) throw new Error('graphile-worker columns on two servers in one run');
  if (!shared) {
    const schema = `leasehold_bench_${randomBytes(3).toString('hex')}_graphile`;
    const utils = makeWorkerUtils({ connectionString: url, schema, logger }).then(async (made) => {
      await made.migrate();
      return made;
    });
    shared = { url, schema, utils, users: 0 };
  }
  shared.users += 1;
  return shared;
}

async function releaseSchema(): Promise<void> {
  if (!shared || --shared.users > 0) return;
  const { schema, utils } = shared;
  shared = undefined;
  const made = await utils;
  await made
    .withPgClient((client: PoolClient) => client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`))
    .catch(() => undefined);
  await made.release();
}

export async function openGraphileProbe(column: GraphileColumn): Promise<ThroughputProbe> {
  const { url, concurrency, label } = column;
  const logger = new Logger(() => () => {});
  const { schema, utils: making } = sharedSchema(url, logger);
  const task = `bench_${label}`;
  const tally = new Tally();
  const parked = new Set<string>();
  let utils: WorkerUtils;
  let runner: Runner;
  try {
    utils = await making;
    runner = await run({
      connectionString: url,
      schema,
      concurrency,
      logger,
      noHandleSignals: true,
      maxPoolSize: concurrency + 2,
      taskList: { [task]: async () => undefined },
    });
  } catch (err) {
    await releaseSchema();
    throw err;
  }
  runner.events.on('job:start', () => tally.started());
  runner.events.on('job:complete', ({ job, error }: { job: Job; error: unknown }) => {
    parked.delete(job.id);
    tally.ended(error ?? undefined);
  });
  const reschedule = (runAt: Date) =>
    parked.size === 0 ? Promise.resolve() : utils.rescheduleJobs([...parked], { runAt });
  return windowProbe(
    {
      topUp: async (pending) => {
        const missing = pending - parked.size;
        if (missing <= 0) return;
        const { rows } = await utils.withPgClient((client: PoolClient) =>
          client.query<{ id: string }>(
            `SELECT id FROM "${schema}".add_jobs((
               SELECT array_agg(ROW($1, '{}'::json, NULL, $2::timestamptz, NULL, NULL, NULL, NULL)::"${schema}".job_spec)
               FROM generate_series(1, $3::int)))`,
            [task, PARKED_AT(), missing],
          ),
        );
        for (const { id } of rows) parked.add(String(id));
      },
      go: async () => {
        await reschedule(new Date());
        await utils.withPgClient((client: PoolClient) =>
          client.query(`SELECT pg_notify('jobs:insert', $1)`, [JSON.stringify({ count: concurrency })]),
        );
      },
      halt: async () => {
        await reschedule(PARKED_AT());
        await tally.settled();
      },
      get completed() {
        return tally.completed;
      },
      get failures() {
        return tally.failures;
      },
      // Its statements commit on their own (no COMMIT to count): transactions are not counted.
      meter: meters(localCounts(false, 'graphile-worker (benchmark process)'), postgresServerCpu(url)),
      peaks: () => ({}),
      close: async () => {
        await runner.stop();
        await releaseSchema();
      },
    },
    concurrency > 1 ? 4 : 2,
  );
}
