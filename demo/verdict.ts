// The demo's verdict, as a pure function of what the services say at the end and what the
// scenario recorded: every job done exactly once in effect, the totals equal, and each staged
// fault refused or recovered as it should be.
import type { AuditReport } from '../audit/index.js';
import type { Job, Stats } from '../queue/types.js';
import { generationPath, recordedOutput, type WorkerLine } from '../worker/index.js';
import type { DemoJob } from './jobs.js';
import type { OutputGeneration } from './outputs.js';
import type { Effect, JournalEntry } from '../receiver/index.js';

/** A freeze the demo staged: a worker stopped inside an injected stall, resumed after a takeover. */
export interface Freeze {
  worker: string;
  job: string;
  token: number;
  before: 'send' | 'finish';
  frozenAt: number;
  takenOverBy?: { worker: string; token: number };
  resumedAt?: number;
  /** The refusal the resumed worker reported for its stale call. */
  refusal?: { op: string; status: number; code: string; reason?: string };
  /** Set when the worker reported the lease lost for this job after it was resumed. */
  lostReported?: boolean;
  /** Set when nobody took the job over (the freeze missed its stall) and the demo resumed it anyway. */
  missed?: boolean;
}

export interface Kill {
  worker: string;
  job: string;
  token: number;
  killedAt: number;
  recoveredBy?: { worker: string; token: number };
}

export interface ScenarioRecord {
  staleSend?: Freeze;
  staleFinish?: Freeze;
  kill?: Kill;
}

/** The receiver's words for what it recorded: the demo reads them through ReceiverClient. */
export type ReceiverEffect = Effect;
export type JournalRow = JournalEntry;

/** What the queue and the receiver say over HTTP once the run is over. */
export interface FinalState {
  stats: Stats;
  jobs: Job[];
  totals: { effects: number; qty: number };
  effects: ReceiverEffect[];
  journal: JournalRow[];
  /** `leasehold audit`'s report on the same two services, when it was run. */
  audit?: AuditReport;
}

export interface Check {
  label: string;
  expected: string;
  actual: string;
  /** Undefined for a row that only informs. */
  ok?: boolean;
}

export interface VerdictInput {
  jobs: readonly DemoJob[];
  final: FinalState;
  scenario: ScenarioRecord;
  events: readonly WorkerLine[];
  /** The generations left in the workers' output folder, when they wrote outputs. */
  outputs?: readonly OutputGeneration[];
}

export function judgeDemo({ jobs, final, scenario, events, outputs }: VerdictInput): Check[] {
  const expectedQty = jobs.reduce((sum, j) => sum + j.qty, 0);
  const { stats, totals } = final;
  const checks: Check[] = [
    {
      label: 'jobs done (queue /stats)',
      expected: `${jobs.length} done, 0 other`,
      actual: `${stats.done} done, ${stats.pending} pending, ${stats.leased} leased, ${stats.dead} dead`,
      ok: stats.done === jobs.length && stats.pending + stats.leased + stats.dead === 0,
    },
    {
      label: 'effects applied (receiver /totals)',
      expected: String(jobs.length),
      actual: String(totals.effects),
      ok: totals.effects === jobs.length,
    },
    {
      label: 'total qty (receiver /totals)',
      expected: String(expectedQty),
      actual: String(totals.qty),
      ok: totals.qty === expectedQty,
    },
    onceEach(jobs, final.effects),
    ...(final.audit ? [auditCheck(final.audit)] : []),
    ...staleSendChecks(scenario.staleSend, final),
    ...staleFinishChecks(scenario.staleFinish, final),
    killChecks(scenario.kill, final),
    ...(outputs ? outputChecks(final, outputs, scenario.staleFinish, events) : []),
    ...tallies(events),
  ];
  return checks;
}

/**
 * Each job's output is the generation its finish recorded — the winner's, written under the
 * winning token and intact — and no other generation is left: the stale ones (the frozen and
 * the killed workers') were removed once the winner was known.
 */
function outputChecks(
  final: FinalState,
  outputs: readonly OutputGeneration[],
  staleFinish: Freeze | undefined,
  events: readonly WorkerLine[],
): Check[] {
  const done = final.jobs.filter((j) => j.status === 'done');
  const winners = new Set(done.map((j) => recordedOutput(j.result)));
  const intact = done.filter((j) => {
    const path = recordedOutput(j.result);
    const content = outputs.find((o) => o.path === path)?.content;
    return path === generationPath(j.id, j.token) && content?.id === j.id && content.token === j.token;
  });
  const stale = outputs.filter((o) => !winners.has(o.path));
  const written = events.filter((e) => e.event === 'output').length;
  const checks: Check[] = [
    {
      label: "each job's output: the winner's generation, intact",
      expected: `${done.length} of ${done.length}`,
      actual: `${intact.length} of ${done.length}`,
      ok: done.length > 0 && intact.length === done.length,
    },
    {
      label: 'stale generations left on disk',
      expected: '0',
      actual: `${stale.length} (${written} written in all)`,
      ok: stale.length === 0,
    },
  ];
  if (staleFinish) {
    const path = generationPath(staleFinish.job, staleFinish.token);
    const wrote = events.some(
      (e) => e.event === 'output' && e.worker === staleFinish.worker && e.job === staleFinish.job && e.path === path,
    );
    const left = outputs.some((o) => o.path === path);
    checks.push({
      label: `${staleFinish.worker}'s stale output ${path}`,
      expected: 'written, then removed',
      actual: !wrote ? 'never written' : left ? 'still there' : 'written, then removed',
      ok: wrote && !left,
    });
  }
  return checks;
}

/** Each job has exactly one effect, with its own qty, and no effect belongs to an unknown job. */
function onceEach(jobs: readonly DemoJob[], effects: readonly ReceiverEffect[]): Check {
  const problems: string[] = [];
  for (const job of jobs) {
    const mine = effects.filter((e) => e.jobId === job.id);
    if (mine.length !== 1) problems.push(`${job.id}: ${mine.length} effects`);
    else if (mine[0]!.qty !== job.qty) problems.push(`${job.id}: qty ${mine[0]!.qty}, not ${job.qty}`);
  }
  const known = new Set(jobs.map((j) => j.id));
  for (const e of effects) if (!known.has(e.jobId)) problems.push(`unknown job ${e.jobId}`);
  return {
    label: "each job's effect once, with its qty",
    expected: `${jobs.length} of ${jobs.length}`,
    actual: problems.length === 0 ? `${jobs.length} of ${jobs.length}` : problems.join('; '),
    ok: problems.length === 0,
  };
}

/** The end-to-end audit as one row: its rules, run on what the two services say. */
function auditCheck(report: AuditReport): Check {
  const found = report.violations.map((v) => `${v.rule}${v.jobId === undefined ? '' : ` ${v.jobId}`}`);
  return {
    label: 'end-to-end audit (leasehold audit)',
    expected: '0 violations',
    actual: found.length === 0 ? '0 violations' : `${found.length}: ${found.join('; ')}`,
    ok: report.ok,
  };
}

function staleSendChecks(freeze: Freeze | undefined, final: FinalState): Check[] {
  if (!freeze)
    return [
      {
        label: 'stale send refused by the gateway',
        expected: '409 stale_lease',
        actual: 'no worker was frozen before a send',
        ok: false,
      },
    ];
  const forwarded = final.journal.filter((j) => j.jobId === freeze.job && j.token === freeze.token).length;
  return [
    {
      label: `stale send refused (${freeze.worker}, ${freeze.job}, token ${freeze.token})`,
      expected: '409 stale_lease',
      actual: freeze.refusal
        ? `${freeze.refusal.status} ${freeze.refusal.code}${freeze.refusal.reason ? ` (${freeze.refusal.reason})` : ''}`
        : 'no refusal reported',
      ok: freeze.refusal?.status === 409 && freeze.refusal.code === 'stale_lease',
    },
    {
      label: `receiver never saw token ${freeze.token} for ${freeze.job}`,
      expected: '0 requests',
      actual: `${forwarded} requests`,
      ok: forwarded === 0,
    },
    doneByAnother(
      `${freeze.job} done by someone other than ${freeze.worker}`,
      freeze.job,
      freeze.worker,
      freeze.token,
      final,
    ),
  ];
}

function staleFinishChecks(freeze: Freeze | undefined, final: FinalState): Check[] {
  if (!freeze)
    return [
      {
        label: 'stale finish refused by the queue',
        expected: '409 stale_lease',
        actual: 'no worker was frozen before a finish',
        ok: false,
      },
    ];
  return [
    {
      label: `stale finish refused (${freeze.worker}, ${freeze.job}, token ${freeze.token})`,
      expected: '409 stale_lease',
      actual: freeze.refusal
        ? `${freeze.refusal.status} ${freeze.refusal.code}${freeze.refusal.reason ? ` (${freeze.refusal.reason})` : ''}`
        : 'no refusal reported',
      ok: freeze.refusal?.status === 409 && freeze.refusal.code === 'stale_lease',
    },
    doneByAnother(
      `${freeze.job} finished by someone other than ${freeze.worker}`,
      freeze.job,
      freeze.worker,
      freeze.token,
      final,
    ),
  ];
}

function killChecks(kill: Kill | undefined, final: FinalState): Check {
  if (!kill)
    return {
      label: "killed worker's job done by another",
      expected: 'done, newer token',
      actual: 'no worker was killed',
      ok: false,
    };
  return doneByAnother(`killed ${kill.worker}'s ${kill.job} done by another`, kill.job, kill.worker, kill.token, final);
}

function doneByAnother(label: string, jobId: string, worker: string, token: number, final: FinalState): Check {
  const job = final.jobs.find((j) => j.id === jobId);
  const actual = job ? `${job.status} by ${job.owner ?? 'nobody'}, token ${job.token}` : 'job not found';
  return {
    label,
    expected: `done, token > ${token}`,
    actual,
    ok: job?.status === 'done' && job.owner !== worker && job.token > token,
  };
}

/** Counts from the workers' own reports, shown for the story; the checks above are the verdict. */
function tallies(events: readonly WorkerLine[]): Check[] {
  const count = (test: (e: WorkerLine) => boolean) => String(events.filter(test).length);
  const refusedAs = (op: string) => (e: WorkerLine) => e.event === 'refused' && e.op === op && e.code === 'stale_lease';
  return [
    {
      label: 'sends applied (worker reports)',
      expected: '',
      actual: count((e) => e.event === 'sent' && e.outcome === 'applied'),
    },
    {
      label: 'duplicate sends absorbed by the receiver',
      expected: '',
      actual: count((e) => e.event === 'sent' && e.outcome === 'duplicate'),
    },
    { label: 'stale sends refused (409)', expected: '', actual: count(refusedAs('send')) },
    { label: 'stale finishes refused (409)', expected: '', actual: count(refusedAs('finish')) },
    { label: 'stale renewals refused (409)', expected: '', actual: count(refusedAs('renew')) },
    { label: 'leases lost', expected: '', actual: count((e) => e.event === 'lost') },
  ];
}
