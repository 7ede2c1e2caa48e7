// Counters read before and after each slice: durable commits from the database files, and what
// each process of a column did (statements, requests received, CPU time), from the benchmark's
// own process, from the services (count-preload.ts), or from /proc.
import { readFile, readdir } from 'node:fs/promises';
import type { SqliteJournal } from '../platform/sqlite.js';
import { changeCounter, walCommitCounter } from './bare-sqlite.js';
import { processCounts, type ProcessCounts } from './counting.js';
import type { LoopResult } from './loops.js';
import type { ChildService } from './processes.js';
import type { SliceResult } from './measure.js';

/**
 * Counters read before and after a slice. A field left undefined is not this counter's to
 * give; null means it could not be read.
 */
export interface Counts {
  transactions?: number | null;
  statements?: number | null;
  requests?: number | null;
  /** CPU time so far in ms, by kind of process. */
  cpu?: ByKind;
  /** Requests received so far, by service. */
  requestsBy?: ByKind;
}

/** A figure by kind of process; null where it could not be read. */
export type ByKind = Record<string, number | null>;

export type Meter = () => Promise<Counts>;

/** Runs `run` between two readings of `meter`. */
export async function metered(meter: Meter, run: () => Promise<LoopResult>): Promise<SliceResult> {
  const before = await meter();
  const result = await run();
  const after = await meter();
  return {
    ...result,
    transactions: delta(before.transactions, after.transactions) ?? null,
    statements: delta(before.statements, after.statements) ?? null,
    requests: delta(before.requests, after.requests) ?? null,
    cpu: deltaByKind(before.cpu, after.cpu),
    requestsBy: deltaByKind(before.requestsBy, after.requestsBy),
  };
}

/** Each kind's change between two readings. */
export function deltaByKind(before: ByKind | undefined, after: ByKind | undefined): ByKind {
  return Object.fromEntries(
    Object.keys({ ...before, ...after }).map((kind) => [kind, delta(before?.[kind], after?.[kind]) ?? null]),
  );
}

/** All kinds together, or null when some could not be read. */
export function cpuTotal(cpu: ByKind): number | null {
  const values = Object.values(cpu);
  return values.some((v) => v === null) ? null : values.reduce((a, b) => a! + b!, 0);
}

/** Several counters read together, each field summed over those that give it. */
export function meters(...parts: Meter[]): Meter {
  return async () => {
    const readings = await Promise.all(parts.map((read) => read()));
    const sum = (pick: (c: Counts) => number | null | undefined): number | null | undefined => {
      const given = readings.map(pick).filter((v) => v !== undefined);
      if (given.length === 0) return undefined;
      return given.some((v) => v === null) ? null : given.reduce((a, b) => a! + b!, 0);
    };
    const byKind = (pick: (c: Counts) => ByKind | undefined): ByKind => {
      const merged: ByKind = {};
      for (const reading of readings) {
        for (const [kind, value] of Object.entries(pick(reading) ?? {})) {
          const sofar = merged[kind];
          merged[kind] = sofar === null || value === null ? null : (sofar ?? 0) + value;
        }
      }
      return merged;
    };
    return {
      transactions: sum((c) => c.transactions),
      statements: sum((c) => c.statements),
      requests: sum((c) => c.requests),
      cpu: byKind((c) => c.cpu),
      requestsBy: byKind((c) => c.requestsBy),
    };
  };
}

/** Durable commits of a SQLite file, from any process: its header's change counter, or the WAL index's. */
export function sqliteCommits(filename: string, journal: SqliteJournal = 'delete'): Meter {
  return async () => ({
    transactions: journal === 'wal' ? await walCommitCounter(filename) : await changeCounter(filename),
  });
}

/**
 * What this process's drivers, servers and CPU did, its CPU counted as `kind`; `pg`: its
 * PostgreSQL COMMITs are the transactions.
 */
export function localCounts(pg = false, kind = 'benchmark process'): Meter {
  return async () => fromProcess(processCounts(), pg, kind);
}

/** What a service's drivers, server and CPU did; `pg`: its PostgreSQL COMMITs are the transactions. */
export function serviceCounts(service: ChildService, kind: string, pg = false): Meter {
  return async () => {
    try {
      return fromProcess(await service.counts(), pg, kind, true);
    } catch {
      return {
        statements: null,
        requests: null,
        cpu: { [kind]: null },
        requestsBy: { [kind]: null },
        ...(pg ? { transactions: null } : {}),
      };
    }
  };
}

function fromProcess(c: ProcessCounts, pg: boolean, kind: string, service = false): Counts {
  return {
    statements: c.statements,
    requests: c.requests,
    cpu: { [kind]: c.cpuMs },
    ...(service ? { requestsBy: { [kind]: c.requests } } : {}),
    ...(pg ? { transactions: c.pgCommits } : {}),
  };
}

/** Clock ticks per second of /proc/<pid>/stat's CPU times (USER_HZ, 100 on Linux). */
const TICKS_PER_SECOND = 100;

/** User and system CPU ms of a process, and its command name, from /proc/<pid>/stat. */
export async function procStat(pid: number | string): Promise<{ command: string; cpuMs: number }> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name, which is in parentheses and may hold spaces.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return {
    command: stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')),
    cpuMs: ((Number(fields[11]) + Number(fields[12])) * 1000) / TICKS_PER_SECOND,
  };
}

/** CPU time of processes this one did not load counters into, from /proc (Linux; null elsewhere). */
export function processCpu(pids: () => readonly number[], kind: string): Meter {
  return async () => {
    let ms = 0;
    for (const pid of pids()) {
      try {
        ms += (await procStat(pid)).cpuMs;
      } catch {
        return { cpu: { [kind]: null } };
      }
    }
    return { cpu: { [kind]: ms } };
  };
}

/**
 * CPU time of every process on this machine running `command` (`postgres`: the server and its
 * backends), from /proc; processes that end between two readings take their time with them.
 * Each process's command is looked up once, so a reading costs one listing and a file per match.
 */
export function commandCpu(command: string, kind: string): Meter {
  const matches = new Map<string, boolean>();
  return async () => {
    let pids: string[];
    try {
      pids = (await readdir('/proc')).filter((name) => /^\d+$/.test(name));
    } catch {
      return { cpu: { [kind]: null } };
    }
    let ms = 0;
    for (const pid of pids) {
      let match = matches.get(pid);
      if (match === undefined) {
        match = (await readFile(`/proc/${pid}/comm`, 'utf8').catch(() => '')).trim() === command;
        matches.set(pid, match);
      }
      if (match) ms += (await procStat(pid).catch(() => ({ cpuMs: 0 }))).cpuMs;
    }
    return { cpu: { [kind]: ms } };
  };
}

/** The PostgreSQL server's CPU, where it runs on this machine (a loopback URL); else nothing. */
export function postgresServerCpu(db: string): Meter {
  const host = /^postgres(ql)?:\/\//i.test(db) ? new URL(db).hostname : '';
  return ['127.0.0.1', 'localhost', '::1', '[::1]'].includes(host)
    ? commandCpu('postgres', 'postgres server (all its processes)')
    : async () => ({});
}

/** Commits between two counter readings, null when either is unknown. */
export function delta(before: number | null | undefined, after: number | null | undefined): number | null | undefined {
  if (before === undefined || after === undefined) return before === after ? undefined : null;
  return before === null || after === null ? null : after - before;
}
