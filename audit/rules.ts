// The end-to-end audit's rules, as one pure function of what the queue and the receiver say:
// every done job has exactly one effect with its qty, no effect belongs to a job the queue does
// not know, no effect carries a token above its job's current token, and the receiver's totals
// agree with its effects. Each violation names the job and both sides' values.

/** What the audit needs of a queue job. */
export interface AuditedJob {
  id: string;
  qty: number;
  status: 'pending' | 'leased' | 'done' | 'dead';
  token: number;
}

/** What the audit needs of a receiver effect. */
export interface AuditedEffect {
  jobId: string;
  qty: number;
  token: number;
}

export interface AuditInput {
  jobs: readonly AuditedJob[];
  effects: readonly AuditedEffect[];
  totals: { effects: number; qty: number };
}

export type RuleName =
  'missing_effect' | 'extra_effects' | 'qty_differs' | 'unknown_job' | 'token_ahead' | 'totals_differ';

export interface Violation {
  rule: RuleName;
  /** Undefined for `totals_differ`, which is about the receiver as a whole. */
  jobId?: string;
  /** The queue's side, as the queue reported it. */
  queue?: Record<string, unknown>;
  /** The receiver's side. */
  receiver?: Record<string, unknown>;
  /** One sentence with both sides' values. */
  message: string;
}

export interface AuditCounts {
  jobs: number;
  done: number;
  effects: number;
  /** Effects of jobs that are not done (yet): not violations, but worth seeing after a run. */
  effectsOfUnfinishedJobs: number;
  totals: { effects: number; qty: number };
}

export interface AuditReport {
  ok: boolean;
  counts: AuditCounts;
  /** The rules checked, in words, in the order they are checked. */
  checked: readonly string[];
  violations: Violation[];
}

export const AUDIT_RULES: readonly string[] = [
  'every done job has exactly one effect, with its qty',
  'no effect belongs to a job the queue does not know',
  "no effect carries a token above its job's current token",
  "the receiver's totals agree with its effects",
];

/**
 * An id as the report prints it: in double quotes, with every control and format character
 * escaped (newline, ESC, DEL, the C1 controls, bidirectional overrides...), so that an id
 * cannot end its line, start a forged one, or move the terminal's cursor.
 */
function quoted(id: string): string {
  return JSON.stringify(id).replace(
    /[\p{Cc}\p{Cf}\u2028\u2029]/gu,
    (c) => `\\u${c.codePointAt(0)!.toString(16).padStart(4, '0')}`,
  );
}

export function auditRules({ jobs, effects, totals }: AuditInput): AuditReport {
  const byJob = new Map<string, AuditedEffect[]>();
  for (const effect of effects) byJob.set(effect.jobId, [...(byJob.get(effect.jobId) ?? []), effect]);
  const known = new Map(jobs.map((job) => [job.id, job]));
  const violations: Violation[] = [];

  for (const job of jobs) {
    if (job.status !== 'done') continue;
    const mine = byJob.get(job.id) ?? [];
    const queue = { status: job.status, qty: job.qty, token: job.token };
    if (mine.length === 0) {
      violations.push({
        rule: 'missing_effect',
        jobId: job.id,
        queue,
        receiver: { effects: 0 },
        message: `job ${quoted(job.id)} is done (qty ${job.qty}, token ${job.token}) but the receiver has no effect for it`,
      });
    } else if (mine.length > 1) {
      violations.push({
        rule: 'extra_effects',
        jobId: job.id,
        queue,
        receiver: { effects: mine.length, qty: mine.map((e) => e.qty), token: mine.map((e) => e.token) },
        message: `job ${quoted(job.id)} is done but the receiver has ${mine.length} effects for it, not 1`,
      });
    } else if (mine[0]!.qty !== job.qty) {
      violations.push({
        rule: 'qty_differs',
        jobId: job.id,
        queue,
        receiver: { qty: mine[0]!.qty, token: mine[0]!.token },
        message: `job ${quoted(job.id)} has qty ${job.qty} in the queue, but its effect has qty ${mine[0]!.qty}`,
      });
    }
  }

  let effectsOfUnfinishedJobs = 0;
  for (const effect of effects) {
    const job = known.get(effect.jobId);
    const receiver = { qty: effect.qty, token: effect.token };
    if (!job) {
      violations.push({
        rule: 'unknown_job',
        jobId: effect.jobId,
        queue: { job: null },
        receiver,
        message: `the receiver has an effect for job ${quoted(effect.jobId)} (qty ${effect.qty}, token ${effect.token}), which the queue does not know`,
      });
      continue;
    }
    if (job.status !== 'done') effectsOfUnfinishedJobs++;
    if (effect.token > job.token) {
      violations.push({
        rule: 'token_ahead',
        jobId: effect.jobId,
        queue: { status: job.status, token: job.token },
        receiver,
        message: `the effect for job ${quoted(effect.jobId)} carries token ${effect.token}, above the job's current token ${job.token}: no claim ever issued it`,
      });
    }
  }

  const sum = effects.reduce((total, effect) => total + effect.qty, 0);
  if (totals.effects !== effects.length || totals.qty !== sum) {
    violations.push({
      rule: 'totals_differ',
      receiver: { totals, listed: { effects: effects.length, qty: sum } },
      message: `the receiver's totals say ${totals.effects} effects, qty ${totals.qty}; its effects add up to ${effects.length}, qty ${sum}`,
    });
  }

  return {
    ok: violations.length === 0,
    counts: {
      jobs: jobs.length,
      done: jobs.filter((job) => job.status === 'done').length,
      effects: effects.length,
      effectsOfUnfinishedJobs,
      totals,
    },
    checked: AUDIT_RULES,
    violations,
  };
}

/** The report as lines a person reads: what was checked, then each violation, then the verdict. */
export function formatAudit(report: AuditReport): string[] {
  const { counts } = report;
  const lines = [
    `audited ${counts.jobs} jobs (${counts.done} done) in the queue against ${counts.effects} effects in the receiver (totals: ${counts.totals.effects} effects, qty ${counts.totals.qty})`,
    ...report.checked.map((rule) => `  checked: ${rule}`),
  ];
  if (counts.effectsOfUnfinishedJobs > 0) {
    lines.push(`  note: ${counts.effectsOfUnfinishedJobs} effects belong to jobs that are not done (yet)`);
  }
  for (const violation of report.violations) {
    const sides = [
      violation.queue ? `queue ${JSON.stringify(violation.queue)}` : undefined,
      violation.receiver ? `receiver ${JSON.stringify(violation.receiver)}` : undefined,
    ].filter(Boolean);
    lines.push(
      `  VIOLATION ${violation.rule}: ${violation.message}${sides.length > 0 ? ` — ${sides.join(', ')}` : ''}`,
    );
  }
  lines.push(
    report.ok
      ? 'ok: every done job took effect exactly once, with its qty'
      : `FAIL: ${report.violations.length} violation${report.violations.length === 1 ? '' : 's'}`,
  );
  return lines;
}
