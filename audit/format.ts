// The audit's report as lines a person reads: what was read and checked, each downstream's
// effects by key, then each violation with both sides' values, then ok or FAIL.
import { keyName, quoted, RECEIVER, type AuditReport, type DownstreamCounts } from './rules.js';

export function formatAudit(report: AuditReport): string[] {
  const { counts } = report;
  const others = counts.downstreams.filter((d) => d.name !== RECEIVER);
  const lines = [
    `audited ${counts.jobs} jobs (${counts.done} done) in the queue against ${counts.effects} effects in the receiver (totals: ${counts.totals.effects} effects, qty ${counts.totals.qty})`,
    ...others.map((d) => `  and against ${d.effects} effects at ${quoted(d.name)}`),
    ...report.checked.map((rule) => `  checked: ${rule}`),
  ];
  if (others.length > 0 || counts.downstreams.some((d) => Object.keys(d.byKey).some((k) => k !== ''))) {
    lines.push(...counts.downstreams.map((d) => `  ${byKeyLine(d)}`));
  }
  if (counts.effectsOfUnfinishedJobs > 0) {
    lines.push(`  note: ${counts.effectsOfUnfinishedJobs} effects belong to jobs that are not done (yet)`);
  }
  for (const e of report.earlierTokens) {
    lines.push(
      `  note: job ${quoted(e.jobId)}'s ${e.key === undefined ? 'effect' : `effect ${quoted(e.key)}`} at ${quoted(e.downstream)} was applied with token ${e.token}, the job finished with token ${e.finishedWith}: an earlier holder sent it, the finisher's send was a duplicate`,
    );
  }
  for (const violation of report.violations) {
    const sides = [
      violation.queue ? `queue ${JSON.stringify(violation.queue)}` : undefined,
      violation.receiver ? `${violation.downstream} ${JSON.stringify(violation.receiver)}` : undefined,
    ].filter(Boolean);
    lines.push(
      `  VIOLATION ${violation.rule}: ${violation.message}${sides.length > 0 ? ` — ${sides.join(', ')}` : ''}`,
    );
  }
  const n = report.violations.length;
  lines.push(
    report.ok
      ? others.length === 0
        ? 'ok: every done job took effect exactly once, with its qty'
        : `ok: every done job took effect exactly once at each of the ${counts.downstreams.length} downstreams, per key`
      : `FAIL: ${n} violation${n === 1 ? '' : 's'}`,
  );
  return lines;
}

/** `"mailer": effects by key: "email" 12 (expected of each done job: "email")`. */
function byKeyLine(d: DownstreamCounts): string {
  const name = (key: string) => (key === '' ? 'default' : quoted(key));
  const keys = Object.entries(d.byKey).map(([key, n]) => `${name(key)} ${n}`);
  const expected = d.expected.map((key) => name(keyName(key)));
  return `${quoted(d.name)}: effects by key: ${keys.length > 0 ? keys.join(', ') : 'none'} (expected of each done job: ${expected.length > 0 ? expected.join(', ') : 'none'})`;
}
