// The peer columns (`--peers`): leasehold's worker library and `leasehold worker` beside BullMQ
// (on its own redis-server, AOF fsync'd on every write), graphile-worker (on the local
// PostgreSQL) and the BullMQ + idempotency-key reference, measured in the same rounds as the
// other columns, and the comparisons the report reads off them.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { END_TO_END_SLICE_MS, type ColumnSpec, type Resources } from '../columns.js';
import type { ThroughputProbe } from '../library.js';
import { REPO_ROOT, type BenchOptions } from '../options.js';
import { startScript, type ChildService } from '../processes.js';
import { openBullmqProbe } from './bullmq.js';
import { openGraphileProbe } from './graphile.js';
import { openWorkerEndToEndProbe, openWorkerLibraryProbe } from './leasehold.js';
import { redisServerVersion, startRedis, type RedisServer } from './redis.js';

/** graphile-worker's server when `--postgres` names none: the local one the tests use. */
export const LOCAL_POSTGRES_URL = 'postgres://postgres@127.0.0.1:5432/test';

const IDEMPOTENCY_SERVICE_PATH = fileURLToPath(new URL('./idempotency-service.js', import.meta.url));

/** One comparison the report prints: leasehold's column over each peer's, round by round. */
export interface PeerComparison {
  column: string;
  leasehold: string;
  peers: { id: string; goal?: number }[];
}

export function versionOf(pkg: string): string {
  try {
    const json = JSON.parse(readFileSync(join(REPO_ROOT, 'node_modules', pkg, 'package.json'), 'utf8')) as {
      version?: string;
    };
    return json.version ?? '?';
  } catch {
    return '?';
  }
}

/** One redis-server for every BullMQ column, started on first use and stopped when the last closes. */
function sharedRedis(): { open(dir: string): Promise<RedisServer>; release(): Promise<void> } {
  let server: Promise<RedisServer> | undefined;
  let users = 0;
  return {
    open: (dir) => {
      users += 1;
      return (server ??= startRedis(dir));
    },
    release: async () => {
      users -= 1;
      if (users > 0 || !server) return;
      const stopping = server;
      server = undefined;
      await (await stopping).stop();
    },
  };
}

function withRelease(probe: ThroughputProbe, release: () => Promise<void>): ThroughputProbe {
  return {
    ...probe,
    close: async () => {
      await probe.close();
      await release();
    },
  };
}

export function peerColumnSpecs(options: BenchOptions, notes: string[]): ColumnSpec[] {
  const n = options.workers;
  const { prefetch } = options;
  /** The label's mention of prefetch, when the run sets it (not the worker's default, auto). */
  const pf = prefetch !== 'auto' ? `, prefetch ${prefetch}` : '';
  const cliPf = prefetch !== 'auto' ? ` --prefetch ${prefetch}` : '';
  const redis = sharedRedis();
  const file = (r: Resources, name: string) => join(r.dir, `${name}.sqlite`);
  const pgUrl = options.postgres ?? LOCAL_POSTGRES_URL;
  const bull = `BullMQ ${versionOf('bullmq')}`;
  const graphile = `graphile-worker ${versionOf('graphile-worker')}`;
  const specs: ColumnSpec[] = [
    {
      id: 'peerLh1',
      label: `peers: leasehold worker library, concurrency 1${pf}, rollback journal`,
      open: (r) =>
        openWorkerLibraryProbe({ db: file(r, 'peer-lh1'), journal: 'delete', concurrency: 1, prefetch, label: 'lh1' }),
    },
    {
      id: 'peerLhN',
      label: `peers: leasehold worker library, concurrency ${n}${pf}, rollback journal`,
      open: (r) =>
        openWorkerLibraryProbe({ db: file(r, 'peer-lhN'), journal: 'delete', concurrency: n, prefetch, label: 'lhN' }),
    },
    {
      id: 'peerLhNWal',
      label: `peers: leasehold worker library, concurrency ${n}${pf}, --journal wal`,
      open: (r) =>
        openWorkerLibraryProbe({
          db: file(r, 'peer-lhN-wal'),
          journal: 'wal',
          concurrency: n,
          prefetch,
          label: 'lhNwal',
        }),
    },
    {
      id: 'peerLhE2e',
      minSliceMs: END_TO_END_SLICE_MS,
      label: `peers: end to end, 1 \`leasehold worker --concurrency ${n}${cliPf}\`, rollback journal`,
      open: (r) => openWorkerEndToEndProbe(r.dir, n, 'delete', 'peer-e2e', prefetch),
    },
    {
      id: 'peerLhE2eWal',
      minSliceMs: END_TO_END_SLICE_MS,
      label: `peers: end to end, 1 \`leasehold worker --concurrency ${n}${cliPf}\`, --journal wal`,
      open: (r) => openWorkerEndToEndProbe(r.dir, n, 'wal', 'peer-e2e-wal', prefetch),
    },
  ];
  const redisVersion = redisServerVersion();
  if (redisVersion === null) {
    notes.push('--peers: no redis-server on PATH, so the BullMQ columns and the idempotency-key reference are skipped');
  } else {
    const bullColumn = (concurrency: number, label: string, downstream?: 'delete' | 'wal') => async (r: Resources) => {
      const server = await redis.open(r.dir);
      let service: ChildService | undefined;
      try {
        const db = file(r, `peer-${label}`);
        const effects = downstream
          ? {
              service: (service = await startScript(`idempotency service (${label})`, IDEMPOTENCY_SERVICE_PATH, [
                '--db',
                db,
                '--journal',
                downstream,
              ])),
              db,
              journal: downstream,
            }
          : undefined;
        const probe = await openBullmqProbe({ redis: server, concurrency, label, downstream: effects });
        return withRelease(probe, async () => {
          await service?.stop();
          await redis.release();
        });
      } catch (err) {
        await service?.stop();
        await redis.release();
        throw err;
      }
    };
    const aof = `redis-server ${redisVersion}, AOF appendfsync always`;
    specs.push(
      { id: 'peerBull1', label: `peers: ${bull}, 1 worker (${aof})`, open: bullColumn(1, 'bull1') },
      { id: 'peerBullN', label: `peers: ${bull}, concurrency ${n} (${aof})`, open: bullColumn(n, 'bullN') },
      {
        id: 'peerIdem',
        minSliceMs: END_TO_END_SLICE_MS,
        label: `peers: ${bull} concurrency ${n} + idempotency-key service on SQLite, rollback journal`,
        open: bullColumn(n, 'idem', 'delete'),
      },
      {
        id: 'peerIdemWal',
        minSliceMs: END_TO_END_SLICE_MS,
        label: `peers: ${bull} concurrency ${n} + idempotency-key service on SQLite, WAL`,
        open: bullColumn(n, 'idemWal', 'wal'),
      },
    );
  }
  specs.push(
    {
      id: 'peerGraphile1',
      label: `peers: ${graphile}, concurrency 1 (PostgreSQL ${new URL(pgUrl).host})`,
      open: () => openGraphileProbe({ url: pgUrl, concurrency: 1, label: 'g1' }),
    },
    {
      id: 'peerGraphileN',
      label: `peers: ${graphile}, concurrency ${n} (PostgreSQL ${new URL(pgUrl).host})`,
      open: () => openGraphileProbe({ url: pgUrl, concurrency: n, label: 'gN' }),
    },
  );
  if (options.postgres) {
    specs.push({
      id: 'peerLhPgN',
      label: `peers: leasehold worker library, concurrency ${n}${pf}, on PostgreSQL`,
      open: (r) =>
        openWorkerLibraryProbe({
          db: r.pg!.schemas.urlFor('peerlhn'),
          journal: 'delete',
          concurrency: n,
          prefetch,
          label: 'lhPgN',
        }),
    });
  }
  // Peers are compared with each other, not with the SQLite limit: no paired limit slices.
  return specs.map((spec) => ({ ...spec, paired: false }));
}

/** The comparisons `--peers` prints, with the goals set for them (leasehold ÷ peer, at least). */
export function peerComparisons(workers: number): PeerComparison[] {
  const n = workers;
  return [
    {
      column: '1 worker',
      leasehold: 'peerLh1',
      peers: [{ id: 'peerBull1', goal: 0.8 }, { id: 'peerGraphile1' }],
    },
    {
      column: `${n} concurrent, rollback journal`,
      leasehold: 'peerLhN',
      peers: [{ id: 'peerBullN', goal: 1 }, { id: 'peerGraphileN' }],
    },
    { column: `${n} concurrent, WAL`, leasehold: 'peerLhNWal', peers: [{ id: 'peerBullN', goal: 1.5 }] },
    { column: `${n} concurrent, PostgreSQL`, leasehold: 'peerLhPgN', peers: [{ id: 'peerGraphileN', goal: 1 }] },
    {
      column: `end to end, ${n} concurrent, rollback journal`,
      leasehold: 'peerLhE2e',
      peers: [{ id: 'peerIdem', goal: 2 }],
    },
    { column: `end to end, ${n} concurrent, WAL`, leasehold: 'peerLhE2eWal', peers: [{ id: 'peerIdemWal', goal: 2 }] },
  ];
}
