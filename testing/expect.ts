// The kit's assertions, built on the end-to-end audit: each throws an ExpectationError whose
// message lists what is wrong, job by job, expected beside actual. Plain Errors, so they read
// the same under vitest, node:test or any runner.
import { audit, type AuditReport, type Violation } from '../audit/index.js';
import type { QueueClient } from '../queue/index.js';
import type { Effect, ReceiverClient } from '../receiver/index.js';

/** A failed expectation; `violations` holds what the message lists, for a test that looks closer. */
export class ExpectationError extends Error {
  override readonly name = 'ExpectationError';

  constructor(
    message: string,
    readonly violations: readonly Violation[] = [],
  ) {
    super(message);
  }
}

/** An effect as the kit reports it: which downstream recorded it. */
export type SystemEffect = Effect & { to: string };

/** A downstream the kit can read: its name, and the stub's store behind it. */
export interface ReadableDownstream {
  name: string;
  client: ReceiverClient;
  effect(jobId: string): Promise<Effect | undefined>;
}

/** Audits the queue against one downstream; throws when a done job did not take effect exactly once there. */
export async function expectExactlyOnceAt(
  queue: QueueClient,
  downstream: ReadableDownstream,
  apiKey: string | undefined,
): Promise<AuditReport> {
  const report = await audit({ queue, receiver: downstream.client, apiKey });
  if (report.ok) return report;
  const { counts } = report;
  const jobs = new Set(report.violations.map((v) => v.jobId).filter((id) => id !== undefined)).size;
  const lines = [
    `expected every done job to take effect exactly once at "${downstream.name}", but ${describeCount(report, jobs)}:`,
    ...report.violations.map((v) => `  ${expectedBesideActual(v)}`),
    `(audited ${counts.jobs} job${plural(counts.jobs)}, ${counts.done} done, against ${counts.effects} effect${plural(counts.effects)} at "${downstream.name}")`,
  ];
  throw new ExpectationError(lines.join('\n'), report.violations);
}

/** Throws when any of `downstreams` has an effect for `jobId`. */
export async function expectNoEffectAt(jobId: string, downstreams: readonly ReadableDownstream[]): Promise<void> {
  const found = await effectsOf(jobId, downstreams);
  if (found.length === 0) return;
  const names = downstreams.map((d) => `"${d.name}"`).join(', ');
  const lines = [
    `expected no effect for job "${jobId}" at ${names}, but ${found.length === 1 ? 'one was' : `${found.length} were`} applied:`,
    ...found.map((e) => `  job "${jobId}": expected no effect; actual: ${describeEffect(e)}`),
  ];
  throw new ExpectationError(lines.join('\n'));
}

/** The first effect for `jobId` at any of `downstreams`, once there is one; rejects after `timeoutMs`. */
export async function waitForEffectAt(
  jobId: string,
  downstreams: readonly ReadableDownstream[],
  timeoutMs: number,
): Promise<SystemEffect> {
  if (!Number.isSafeInteger(timeoutMs) || timeoutMs < 0) {
    throw new RangeError(`timeoutMs must be a whole number of milliseconds, not ${String(timeoutMs)}.`);
  }
  // Real time: a manual clock stands still while the code under test works.
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const [first] = await effectsOf(jobId, downstreams);
    if (first) return first;
    if (Date.now() >= deadline) {
      const names = downstreams.map((d) => `"${d.name}"`).join(', ');
      throw new ExpectationError(
        `expected an effect for job "${jobId}" at ${names} within ${timeoutMs} ms; actual: none arrived.`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, EFFECT_POLL_MS));
  }
}

/** How often waitForEffect looks: each look is one read of one row per downstream, in this process. */
const EFFECT_POLL_MS = 5;

async function effectsOf(jobId: string, downstreams: readonly ReadableDownstream[]): Promise<SystemEffect[]> {
  const found = await Promise.all(
    downstreams.map(async (d) => {
      const effect = await d.effect(jobId);
      return effect ? { ...effect, to: d.name } : undefined;
    }),
  );
  return found.filter((e) => e !== undefined);
}

function describeEffect(effect: SystemEffect): string {
  return `an effect at "${effect.to}" with qty ${effect.qty}, token ${effect.token}, applied at ${effect.appliedAt}`;
}

function describeCount(report: AuditReport, jobs: number): string {
  const n = report.violations.length;
  const about = jobs > 0 ? ` about ${jobs} job${plural(jobs)}` : '';
  return `the audit found ${n} violation${plural(n)}${about}`;
}

function plural(n: number): string {
  return n === 1 ? '' : 's';
}

/** One violation as one line: which job, which rule, what was expected and what is. */
export function expectedBesideActual(violation: Violation): string {
  const q = violation.queue ?? {};
  const r = violation.receiver ?? {};
  const at = violation.jobId === undefined ? 'the receiver' : `job "${violation.jobId}"`;
  const [expected, actual] = sides(violation.rule, q, r);
  return `${at} (${violation.rule}): expected ${expected}; actual: ${actual}`;
}

function sides(rule: Violation['rule'], q: Record<string, unknown>, r: Record<string, unknown>): [string, string] {
  const list = (value: unknown) => (Array.isArray(value) ? value.join(', ') : String(value));
  switch (rule) {
    case 'missing_effect':
      return [`1 effect with qty ${String(q.qty)} (the job is done, token ${String(q.token)})`, 'no effect'];
    case 'extra_effects':
      return [`1 effect`, `${String(r.effects)} effects (qty ${list(r.qty)}; tokens ${list(r.token)})`];
    case 'qty_differs':
      return [`qty ${String(q.qty)} (the job's)`, `qty ${String(r.qty)} (token ${String(r.token)})`];
    case 'unknown_job':
      return ['no effect (the queue has no such job)', `an effect with qty ${String(r.qty)}, token ${String(r.token)}`];
    case 'token_ahead':
      return [
        `a token at most ${String(q.token)} (the job's current token)`,
        `token ${String(r.token)} (qty ${String(r.qty)})`,
      ];
    case 'totals_differ': {
      const listed = (r.listed ?? {}) as Record<string, unknown>;
      const totals = (r.totals ?? {}) as Record<string, unknown>;
      return [
        `totals of ${String(listed.effects)} effects, qty ${String(listed.qty)} (what its effects add up to)`,
        `totals of ${String(totals.effects)} effects, qty ${String(totals.qty)}`,
      ];
    }
  }
}
