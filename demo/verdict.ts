// The demo's verdict, as a pure function of what the services say at the end and what the
// scenario recorded: every job done exactly once in effect, the totals equal, and each staged
// fault refused or recovered as it should be.
import type { AuditReport } from '../audit/index.js';
import type { Job, Stats } from '../queue/types.js';
import { generationPath, recordedOutput, type WorkerLine } from '../worker/index.js';
import type { DemoJob } from './jobs.js';
import type { OutputGeneration } from './outputs.js';
import type { Effect, JournalEntry } from '../receiver/index.js';
import type { Mail } from './mailer.js';
import { effectChecks, notSeenBy } from './verdict-effects.js';

/** A freeze the demo staged: a worker stopped inside an injected stall, resumed after a takeover. */
export interface Freeze {
  worker: string;
  job: string;
  token: number;
  before: 'send' | 'finish';
  frozenAt: number;
  takenOverBy?: { worker: string; token: number };
  resumedAt?: number;
  /** The refusal the resumed worker reported for its stale call (the first, for sends). */
  refusal?: { op: string; status: number; code: string; reason?: string };
  /** How many of its stale sends were refused `409 stale_lease`: one per effect it sends. */
  refusedSends?: number;
  /** Its stale sends that ended otherwise (cut, unreachable): each named by its code. */
  failedSends?: string[];
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

/** What the demo's mailer says over HTTP: its effects and journal (as the receiver lists them) and its outbox. */
export interface MailerState {
  effects: ReceiverEffect[];
  journal: JournalRow[];
  mails: Mail[];
}

/** What the queue, the receiver and the mailer say over HTTP once the run is over. */
export interface FinalState {
  stats: Stats;
  jobs: Job[];
  totals: { effects: number; qty: number };
  effects: ReceiverEffect[];
  journal: JournalRow[];
  /** The demo's second downstream, when it ran. */
  mailer?: MailerState;
  /** `leasehold audit`'s report on the same services, when it was run. */
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
    ...effectChecks(jobs, final),
    ...(final.audit ? auditChecks(final.audit) : []),
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

/**
 * The end-to-end audit as one row, its rules run on what the services say; and, to inform, the
 * effects it found applied under an earlier lease than the finishing one (the stale finish's).
 */
function auditChecks(report: AuditReport): Check[] {
  // One phrase per job and pair of tokens: `job-03 at receiver, mailer (token 1, finished with 2)`.
  const byJob = new Map<string, string[]>();
  for (const e of report.earlierTokens) {
    const id = JSON.stringify([e.jobId, e.token, e.finishedWith]);
    byJob.set(id, [...(byJob.get(id) ?? []), e.downstream]);
  }
  const earlier = [...byJob].map(([id, at]) => {
    const [jobId, token, finishedWith] = JSON.parse(id) as [string, number, number];
    return `${jobId} at ${at.join(', ')} (token ${token}, finished with ${finishedWith})`;
  });
  return [
    auditCheck(report),
    {
      label: 'effects sent under an earlier lease (audit notes)',
      expected: '',
      actual: earlier.length === 0 ? '0' : earlier.join('; '),
    },
  ];
}

function auditCheck(report: AuditReport): Check {
  const found = report.violations.map(
    (v) =>
      `${v.rule} at ${v.downstream}${v.jobId === undefined ? '' : ` ${v.jobId}`}${v.key === undefined ? '' : ` ${v.key}`}`,
  );
  const downstreams = report.counts.downstreams.map((d) => d.name).join(' and ');
  return {
    label: `end-to-end audit of ${downstreams} (leasehold audit)`,
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
  // One send per downstream, both on their way before the freeze: each must be refused.
  const sends = final.mailer ? 2 : 1;
  const refused = freeze.refusedSends ?? 0;
  const failed = freeze.failedSends?.length
    ? `; ${freeze.failedSends.length} failed (${freeze.failedSends.join(', ')})`
    : '';
  const as = freeze.refusal
    ? `${freeze.refusal.status} ${freeze.refusal.code}${freeze.refusal.reason ? ` (${freeze.refusal.reason})` : ''}`
    : 'no refusal reported';
  return [
    {
      label: `stale sends refused (${freeze.worker}, ${freeze.job}, token ${freeze.token})`,
      expected: sends === 1 ? '409 stale_lease' : `${sends} × 409 stale_lease`,
      actual: `${sends === 1 || refused === 0 ? as : `${refused} × ${as}`}${failed}`,
      ok: freeze.refusal?.status === 409 && freeze.refusal.code === 'stale_lease' && refused === sends,
    },
    notSeenBy('receiver', final.journal, freeze),
    ...(final.mailer ? [notSeenBy('mailer', final.mailer.journal, freeze)] : []),
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
  const sentTo = (outcome: string) => {
    const at = new Map<string, number>();
    for (const e of events) {
      if (e.event === 'sent' && e.outcome === outcome)
        at.set(e.to ?? 'receiver', (at.get(e.to ?? 'receiver') ?? 0) + 1);
    }
    const total = [...at.values()].reduce((sum, n) => sum + n, 0);
    return at.size > 1 ? `${total} (${[...at].map(([to, n]) => `${n} at ${to}`).join(', ')})` : String(total);
  };
  return [
    { label: 'sends applied (worker reports)', expected: '', actual: sentTo('applied') },
    { label: 'duplicate sends absorbed by the downstream', expected: '', actual: sentTo('duplicate') },
    { label: 'stale sends refused (409)', expected: '', actual: count(refusedAs('send')) },
    { label: 'stale finishes refused (409)', expected: '', actual: count(refusedAs('finish')) },
    { label: 'stale renewals refused (409)', expected: '', actual: count(refusedAs('renew')) },
    { label: 'leases lost', expected: '', actual: count((e) => e.event === 'lost') },
  ];
}
