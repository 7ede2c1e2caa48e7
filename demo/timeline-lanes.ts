// The demo's run laid out for a picture: per worker, each lease from claim to its end with its
// renewals, sends and refusals; the staged freezes and kills; each downstream's journal. Pure: the
// recorded run in, times in ms since the demo started out. timeline-html.ts draws it.
import type { WorkerLine } from '../worker/index.js';
import { describeEvent, type TimelineEntry } from './timeline.js';
import type { Check, FinalState, ScenarioRecord } from './verdict.js';

/** What the picture needs of a run: `DemoResult` is one. */
export interface TimelineInput {
  /** Epoch ms of the demo's start: every time in the picture is relative to it. */
  startedAt: number;
  durationMs: number;
  ok: boolean;
  reasons: readonly string[];
  options: { jobs: number; workers: number; leaseMs: number; workMs: number; seed: number };
  events: readonly WorkerLine[];
  scenario: ScenarioRecord;
  final: FinalState | undefined;
  checks: readonly Check[];
  timeline?: readonly TimelineEntry[];
}

/** How a lease ended for the worker that held it. */
export type LeaseEnd = 'finished' | 'failed' | 'lost' | 'released' | 'killed' | 'stopped' | 'open';

export interface LeaseBar {
  job: string;
  token: number;
  attempt: number;
  start: number;
  /** The last moment the worker acted on this lease (or was killed holding it). */
  end: number;
  /** When the queue's lease ran out, as last granted (claim or renewal). */
  leaseUntil: number;
  endedBy: LeaseEnd;
  /** Renewals granted. */
  renewals: number[];
  /** Row inside the worker's lane: leases held at once sit on separate rows. */
  track: number;
}

export type MarkKind = 'refused' | 'applied' | 'duplicate' | 'stalled';

export interface Mark {
  kind: MarkKind;
  at: number;
  job: string;
  token: number;
  track: number;
  /** The sentence the text timeline prints for it. */
  text: string;
  /** For a refusal: the call refused and the code it got. */
  op?: string;
  code?: string;
}

export interface Interval {
  from: number;
  to: number;
  text: string;
}

export interface WorkerLane {
  worker: string;
  tracks: number;
  leases: LeaseBar[];
  marks: Mark[];
  freezes: Interval[];
  kill?: { at: number; text: string };
}

/** One request a downstream judged, from its journal. */
export interface ReceiverMark {
  at: number;
  job: string;
  /** Absent for the job's default effect. */
  key?: string;
  token: number;
  qty: number;
  outcome: string;
  text: string;
}

/** A downstream's lane: the receiver's, then the mailer's. */
export interface DownstreamLane {
  name: string;
  marks: ReceiverMark[];
}

export interface TimelineModel {
  from: number;
  to: number;
  lanes: WorkerLane[];
  downstreams: DownstreamLane[];
}

export function timelineModel(input: TimelineInput): TimelineModel {
  const t0 = input.startedAt;
  const byWorker = new Map<string, WorkerLine[]>();
  for (const e of input.events) {
    const list = byWorker.get(e.worker) ?? [];
    list.push(e);
    byWorker.set(e.worker, list);
  }
  const staged = stagedFaults(input.scenario);
  const workers = [...byWorker.keys()].sort((a, b) => a.localeCompare(b, 'en', { numeric: true }));
  const lanes = workers.map((worker) =>
    workerLane(
      worker,
      byWorker.get(worker)!.sort((a, b) => a.t - b.t),
      t0,
      staged.freezes.filter((f) => f.worker === worker),
      staged.kills.find((k) => k.worker === worker),
    ),
  );
  const journals = [
    { name: 'receiver', journal: input.final?.journal ?? [] },
    ...(input.final?.mailer ? [{ name: 'mailer', journal: input.final.mailer.journal }] : []),
  ];
  const downstreams = journals.map(({ name, journal }) => ({
    name,
    marks: journal.map((j) => ({
      at: j.at - t0,
      job: j.jobId,
      ...(j.key === undefined ? {} : { key: j.key }),
      token: j.token,
      qty: j.qty ?? 0,
      outcome: j.outcome,
      text: `${name}: ${j.jobId}${j.key === undefined ? '' : ` key ${j.key}`}${j.qty === undefined ? '' : ` qty ${j.qty}`} with token ${j.token}: ${j.outcome}`,
    })),
  }));
  const times = [
    ...lanes.flatMap((l) => [...l.leases.flatMap((b) => [b.start, b.end]), ...l.marks.map((m) => m.at)]),
    ...lanes.flatMap((l) => l.freezes.flatMap((f) => [f.from, f.to])),
    ...downstreams.flatMap((d) => d.marks.map((r) => r.at)),
  ];
  const from = times.length ? Math.min(...times) : 0;
  const to = times.length ? Math.max(...times) : input.durationMs;
  return { from, to: Math.max(to, from + 1), lanes, downstreams };
}

interface StagedFreeze extends Interval {
  worker: string;
}

/**
 * Every freeze and kill the scenario staged, whatever slot it is recorded in: a record with a
 * `frozenAt` is a freeze, one with a `killedAt` a kill.
 */
function stagedFaults(scenario: ScenarioRecord): {
  freezes: StagedFreeze[];
  kills: Array<{ worker: string; at: number; text: string }>;
} {
  const freezes: StagedFreeze[] = [];
  const kills: Array<{ worker: string; at: number; text: string }> = [];
  for (const record of Object.values(scenario) as unknown[]) {
    if (typeof record !== 'object' || record === null) continue;
    const r = record as Record<string, unknown>;
    if (typeof r.worker !== 'string') continue;
    const job = typeof r.job === 'string' ? r.job : 'its job';
    if (typeof r.frozenAt === 'number') {
      const to = typeof r.resumedAt === 'number' ? r.resumedAt : r.frozenAt;
      const before = typeof r.before === 'string' ? ` before its ${r.before}` : '';
      freezes.push({
        worker: r.worker,
        from: r.frozenAt,
        to,
        text: `${r.worker} frozen (SIGSTOP) at ${r.frozenAt} ms${before} of ${job} with token ${String(r.token)}; resumed (SIGCONT) at ${to} ms`,
      });
    }
    if (typeof r.killedAt === 'number') {
      kills.push({
        worker: r.worker,
        at: r.killedAt,
        text: `${r.worker} killed (SIGKILL) at ${r.killedAt} ms holding ${job} with token ${String(r.token)}`,
      });
    }
  }
  return { freezes, kills };
}

function workerLane(
  worker: string,
  events: readonly WorkerLine[],
  t0: number,
  freezes: readonly Interval[],
  kill: { at: number; text: string } | undefined,
): WorkerLane {
  const leases: LeaseBar[] = [];
  const open = new Map<string, LeaseBar>();
  const key = (job: string, token: number) => `${job}#${token}`;
  const pending: Array<Omit<Mark, 'track'> & { key: string }> = [];
  let last = 0;
  for (const e of events) {
    const at = e.t - t0;
    last = Math.max(last, at);
    if (!('job' in e) || !('token' in e)) {
      if (e.event === 'stopped') {
        for (const bar of open.values()) settle(bar, at, 'stopped');
        open.clear();
      }
      continue;
    }
    const k = key(e.job, e.token);
    const bar = open.get(k) ?? leases.find((b) => b.job === e.job && b.token === e.token);
    switch (e.event) {
      case 'claimed': {
        const fresh: LeaseBar = {
          job: e.job,
          token: e.token,
          attempt: e.attempt,
          start: at,
          end: at,
          leaseUntil: e.leaseUntil - t0,
          endedBy: 'open',
          renewals: [],
          track: 0,
        };
        leases.push(fresh);
        open.set(k, fresh);
        break;
      }
      case 'renewed':
        if (bar) {
          bar.renewals.push(at);
          bar.leaseUntil = Math.max(bar.leaseUntil, e.leaseUntil - t0);
        }
        break;
      case 'finished':
      case 'failed':
      case 'lost':
      case 'released':
        if (bar && open.has(k)) {
          settle(bar, at, e.event);
          open.delete(k);
        }
        break;
      case 'refused':
        pending.push({
          key: k,
          kind: 'refused',
          at,
          job: e.job,
          token: e.token,
          op: e.op,
          code: e.code,
          text: describeEvent(e, t0),
        });
        break;
      case 'sent':
      case 'stalled':
        pending.push({
          key: k,
          kind: e.event === 'sent' ? e.outcome : 'stalled',
          at,
          job: e.job,
          token: e.token,
          text: describeEvent(e, t0),
        });
        break;
    }
    // Whatever the worker still does with a lease it lost (a late refusal) belongs to that lease.
    if (bar) bar.end = Math.max(bar.end, at);
  }
  for (const bar of open.values()) {
    if (kill && kill.at >= bar.start) settle(bar, kill.at, 'killed');
    else settle(bar, Math.max(bar.end, Math.min(bar.leaseUntil, last)), 'open');
  }
  const tracks = assignTracks(leases);
  const trackOf = (k: string) => leases.find((b) => key(b.job, b.token) === k)?.track ?? 0;
  const marks = pending.map(({ key: k, ...m }) => ({ ...m, track: trackOf(k) }));
  return { worker, tracks, leases, marks, freezes: [...freezes], ...(kill ? { kill } : {}) };
}

function settle(bar: LeaseBar, at: number, endedBy: LeaseEnd): void {
  bar.end = Math.max(bar.end, at);
  bar.endedBy = endedBy;
}

/** Greedy rows: each lease on the first row free since before its claim; returns how many rows. */
function assignTracks(leases: LeaseBar[]): number {
  const rowEnds: number[] = [];
  for (const bar of [...leases].sort((a, b) => a.start - b.start)) {
    let row = rowEnds.findIndex((end) => end < bar.start);
    if (row === -1) row = rowEnds.push(0) - 1;
    rowEnds[row] = Math.max(bar.end, bar.endedBy === 'killed' ? bar.leaseUntil : bar.end);
    bar.track = row;
  }
  return Math.max(1, rowEnds.length);
}
