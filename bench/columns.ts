// The columns of the main table: what each measures and how it is opened. Services and systems
// are started on first use and shared between the columns that need them.
import { join } from 'node:path';
import { openLibraryFleetProbe, openLibraryProbe, type ThroughputProbe } from './library.js';
import { openBareLimit, type LimitProbe } from './limit.js';
import type { BenchOptions } from './options.js';
import { openPostgresLimit, type PostgresSchemas } from './postgres.js';
import { openEndToEndProbe, openHttpProbe, type System } from './services.js';
import { openWorkerCliProbe, workerFlags } from './worker-cli.js';
import { peerColumnSpecs } from './peers/columns.js';

/** What the columns are opened with; systems start on first use and are shared. */
export interface Resources {
  dir: string;
  /** The system the minimal workers and the latency probe share. */
  system(): Promise<System>;
  /** The system `leasehold worker` runs on, alone: its workers wait for work between slices. */
  workerSystem(): Promise<System>;
  pg: { schemas: PostgresSchemas } | null;
}

/**
 * The shortest slice of an end-to-end column and of the peers it is compared with: each slice
 * wakes worker processes from their long polls, and the first waves of claims, sends and
 * finishes take a share of a 250 ms slice that a running worker never pays.
 */
export const END_TO_END_SLICE_MS = 800;

export interface ColumnSpec {
  id: string;
  label: string;
  /** A column that explains others rather than meets a goal: skipped with --no-references. */
  reference?: boolean;
  /** False: no slice of the limit just before each of its slices (a column not divided by the limit). */
  paired?: boolean;
  /**
   * Its shortest slice, in ms (capped at the round's window): for a column of worker processes
   * that wake from idle at each slice's start, whose ramp a short slice would mostly measure.
   */
  minSliceMs?: number;
  open(r: Resources): Promise<ThroughputProbe>;
}

function asColumn(limit: LimitProbe): ThroughputProbe {
  return { prepare: limit.prepare, slice: limit.slice, peaks: () => ({}), close: limit.close };
}

export function columnSpecs(options: BenchOptions, notes: string[]): ColumnSpec[] {
  const n = options.workers;
  const p = options.e2eProcesses;
  const c = options.e2eConcurrency;
  const hasConcurrency = workerFlags().has('--concurrency');
  if (!hasConcurrency)
    notes.push(
      `this build's \`leasehold worker\` has no --concurrency: each of its ${p} processes ran one job at a time`,
    );
  const file = (r: Resources, name: string) => join(r.dir, `${name}.sqlite`);
  const specs: ColumnSpec[] = [
    {
      id: 'limit',
      label: 'limit: raw sqlite3 write transactions, rollback journal',
      open: async (r) => asColumn(await openBareLimit(file(r, 'limit'))),
    },
    {
      id: 'limitWal',
      label: 'raw sqlite3 write transactions, WAL',
      open: async (r) => asColumn(await openBareLimit(file(r, 'limit-wal'), 'wal')),
    },
    {
      id: 'library1',
      label: 'queue library, 1 loop',
      open: (r) => openLibraryProbe(file(r, 'library1'), 1, 'lib1'),
    },
    {
      id: 'libraryN',
      label: `queue library, ${n} loops in 1 process`,
      open: (r) => openLibraryProbe(file(r, 'libraryN'), n, 'libN'),
    },
    {
      id: 'libraryNWal',
      label: `queue library, ${n} loops in 1 process, WAL`,
      open: (r) => openLibraryProbe(file(r, 'libraryN-wal'), n, 'libNwal', 'wal'),
    },
    {
      id: 'libraryNp',
      label: `queue library, ${p} processes on one file`,
      reference: true,
      open: (r) => openLibraryFleetProbe(file(r, 'libraryNp'), p, 'libNp'),
    },
    {
      id: 'http1',
      label: 'HTTP, 1 worker',
      open: (r) => openHttpProbe({ db: file(r, 'http1'), loops: 1, label: 'http1' }),
    },
    {
      id: 'bareHttp1',
      label: 'reference: the store behind bare node:http, 1 worker',
      reference: true,
      open: (r) => openHttpProbe({ db: file(r, 'bare-http1'), loops: 1, label: 'bare1', front: 'bare' }),
    },
    {
      id: 'httpN',
      label: `HTTP, ${n} workers`,
      open: (r) => openHttpProbe({ db: file(r, 'httpN'), loops: n, label: 'httpN' }),
    },
    {
      id: 'bareHttpN',
      label: `reference: the store behind bare node:http, ${n} workers`,
      reference: true,
      open: (r) => openHttpProbe({ db: file(r, 'bare-httpN'), loops: n, label: 'bareN', front: 'bare' }),
    },
    {
      id: 'httpNWal',
      label: `HTTP, ${n} workers, --journal wal`,
      open: (r) => openHttpProbe({ db: file(r, 'httpN-wal'), loops: n, label: 'httpNwal', journal: 'wal' }),
    },
    {
      id: 'e2eWorker',
      label: `end to end, ${p} \`leasehold worker\`${hasConcurrency ? ` --concurrency ${c}` : ''}`,
      minSliceMs: END_TO_END_SLICE_MS,
      open: async (r) => openWorkerCliProbe(await r.workerSystem(), p, c, 'e2eWorker'),
    },
    {
      id: 'e2e',
      label: `reference: end to end, ${p} minimal workers x ${c} loops`,
      minSliceMs: END_TO_END_SLICE_MS,
      reference: true,
      open: async (r) => openEndToEndProbe(await r.system(), p, c, 'e2e'),
    },
  ];
  if (options.postgres) {
    const pg = (r: Resources) => r.pg!.schemas;
    specs.push(
      {
        id: 'pgLimit',
        label: 'PostgreSQL limit: raw pg write transactions',
        open: async (r) => asColumn(await openPostgresLimit(pg(r).urlFor('limit'))),
      },
      {
        id: 'pgLibraryN',
        label: `PostgreSQL: queue library, ${n} loops in 1 process`,
        open: (r) => openLibraryProbe(pg(r).urlFor('libn'), n, 'pgN'),
      },
      {
        id: 'pgHttp1',
        label: 'PostgreSQL: HTTP, 1 worker',
        open: (r) => openHttpProbe({ db: pg(r).urlFor('http1'), loops: 1, label: 'pgHttp1' }),
      },
      {
        id: 'pgHttpN',
        label: `PostgreSQL: HTTP, ${n} workers`,
        open: (r) => openHttpProbe({ db: pg(r).urlFor('httpn'), loops: n, label: 'pgHttpN' }),
      },
    );
  }
  if (options.peers) specs.push(...peerColumnSpecs(options, notes));
  if (options.columns) {
    const unknown = options.columns.filter((id) => !specs.some((spec) => spec.id === id));
    if (unknown.length > 0)
      throw new RangeError(
        `--columns: no column ${unknown.join(', ')}; the columns are ${specs.map((s) => s.id).join(', ')}.`,
      );
    return specs.filter((spec) => spec.id === 'limit' || options.columns!.includes(spec.id));
  }
  return specs.filter((spec) => options.references || !spec.reference);
}
