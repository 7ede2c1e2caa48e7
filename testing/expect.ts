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
  /** The effect for `(jobId, key)`; `key` left out: the job's default effect. */
  effect(jobId: string, key?: string): Promise<Effect | undefined>;
  /** Every effect of the job, whatever its key. */
  effects(jobId: string): Promise<Effect[]>;
}

/**
 * Which of a job's effects an assertion is about: a key, the default effect (`null`), several
 * of them; left out, `expectExactlyOnce` and `waitForEffect` mean the default effect and
 * `expectNoEffect` every effect of the job.
 */
export type KeyChoice = string | null | ReadonlyArray<string | null>;

const keysOf = (key: KeyChoice | undefined): Array<string | null> | undefined =>
  key === undefined ? undefined : typeof key === 'string' || key === null ? [key] : [...key];

/** `effect "email"` or `effect` (the default one), as a message names it. */
const effectWord = (key: string | null | undefined) => (key == null ? 'effect' : `effect "${key}"`);

/**
 * Audits the queue against one downstream, for the keys asked (default: the default effect);
 * throws when a done job did not take each of them exactly once there.
 */
export async function expectExactlyOnceAt(
  queue: QueueClient,
  downstream: ReadableDownstream,
  apiKey: string | undefined,
  key?: KeyChoice,
): Promise<AuditReport> {
  const keys = keysOf(key) ?? [null];
  const found = await audit({ queue, receiver: downstream.client, apiKey, receiverKeys: keys });
  // The audit reads the stub as "the receiver"; the report names it as the system does.
  const report = { ...found, violations: found.violations.map((v) => ({ ...v, downstream: downstream.name })) };
  if (report.ok) return report;
  const { counts } = report;
  const jobs = new Set(report.violations.map((v) => v.jobId).filter((id) => id !== undefined)).size;
  const which = keys.length === 1 && keys[0] === null ? '' : ` (${keys.map(effectWord).join(', ')})`;
  const lines = [
    `expected every done job to take effect exactly once at "${downstream.name}"${which}, but ${describeCount(report, jobs)}:`,
    ...report.violations.map((v) => `  ${expectedBesideActual(v)}`),
    `(audited ${counts.jobs} job${plural(counts.jobs)}, ${counts.done} done, against ${counts.effects} effect${plural(counts.effects)} at "${downstream.name}")`,
  ];
  throw new ExpectationError(lines.join('\n'), report.violations);
}

/** Throws when any of `downstreams` has an effect for `jobId` (only those under `key`, when given). */
export async function expectNoEffectAt(
  jobId: string,
  downstreams: readonly ReadableDownstream[],
  key?: KeyChoice,
): Promise<void> {
  const keys = keysOf(key);
  const found = keys === undefined ? await allEffectsOf(jobId, downstreams) : await effectsOf(jobId, downstreams, keys);
  if (found.length === 0) return;
  const names = downstreams.map((d) => `"${d.name}"`).join(', ');
  const what = keys === undefined ? 'effect' : keys.map(effectWord).join(' or ');
  const lines = [
    `expected no ${what} for job "${jobId}" at ${names}, but ${found.length === 1 ? 'one was' : `${found.length} were`} applied:`,
    ...found.map(
      (e) =>
        `  job "${jobId}"${e.key === undefined ? '' : `, effect "${e.key}"`}: expected no effect; actual: ${describeEffect(e)}`,
    ),
  ];
  throw new ExpectationError(lines.join('\n'));
}

/**
 * The first effect for `jobId` at any of `downstreams` (under `key`, default the job's default
 * effect), once there is one; rejects after `timeoutMs` (checked by checkChoice).
 */
export async function waitForEffectAt(
  jobId: string,
  downstreams: readonly ReadableDownstream[],
  timeoutMs: number,
  key?: KeyChoice,
): Promise<SystemEffect> {
  const keys = keysOf(key) ?? [null];
  // Real time: a manual clock stands still while the code under test works.
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const [first] = await effectsOf(jobId, downstreams, keys);
    if (first) return first;
    if (Date.now() >= deadline) {
      const names = downstreams.map((d) => `"${d.name}"`).join(', ');
      const what = keys.length === 1 && keys[0] === null ? 'an effect' : `an ${keys.map(effectWord).join(' or ')}`;
      const others = await allEffectsOf(jobId, downstreams);
      const seen =
        others.length === 0
          ? 'none arrived.'
          : `none arrived; there ${others.length === 1 ? 'is' : 'are'} ${others.map(describeEffect).join('; ')}.`;
      throw new ExpectationError(
        `expected ${what} for job "${jobId}" at ${names} within ${timeoutMs} ms; actual: ${seen}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, EFFECT_POLL_MS));
  }
}

/** How often waitForEffect looks: each look is one read of one row per downstream and key, in this process. */
const EFFECT_POLL_MS = 5;

async function effectsOf(
  jobId: string,
  downstreams: readonly ReadableDownstream[],
  keys: ReadonlyArray<string | null>,
): Promise<SystemEffect[]> {
  const found = await Promise.all(
    downstreams.flatMap((d) =>
      keys.map(async (key) => {
        const effect = await d.effect(jobId, key ?? undefined);
        return effect ? { ...effect, to: d.name } : undefined;
      }),
    ),
  );
  return found.filter((e) => e !== undefined);
}

async function allEffectsOf(jobId: string, downstreams: readonly ReadableDownstream[]): Promise<SystemEffect[]> {
  const found = await Promise.all(
    downstreams.map(async (d) => (await d.effects(jobId)).map((e) => ({ ...e, to: d.name }))),
  );
  return found.flat();
}

function describeEffect(effect: SystemEffect): string {
  const fields = [
    effect.qty === undefined ? undefined : `qty ${effect.qty}`,
    effect.body === undefined ? undefined : `body ${JSON.stringify(effect.body)}`,
  ].filter((f) => f !== undefined);
  const key = effect.key === undefined ? '' : ` "${effect.key}"`;
  return `an effect${key} at "${effect.to}"${fields.length > 0 ? ` with ${fields.join(', ')}` : ''}, token ${effect.token}, applied at ${effect.appliedAt}`;
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
  const at =
    violation.jobId === undefined
      ? `"${violation.downstream}"`
      : `job "${violation.jobId}"${violation.key === undefined ? '' : `, effect "${violation.key}"`}`;
  const [expected, actual] = sides(violation.rule, q, r, violation.key);
  return `${at} (${violation.rule}): expected ${expected}; actual: ${actual}`;
}

function sides(
  rule: Violation['rule'],
  q: Record<string, unknown>,
  r: Record<string, unknown>,
  key: string | undefined,
): [string, string] {
  const list = (value: unknown) => (Array.isArray(value) ? value.join(', ') : String(value));
  // An effect sent without qty (a keyed effect with only a body) has none to show.
  const qty = (value: unknown) => (value === undefined ? 'no qty' : `qty ${String(value)}`);
  const one = key === undefined ? `1 effect with qty ${String(q.qty)}` : `1 effect "${key}"`;
  switch (rule) {
    case 'missing_effect':
      return [`${one} (the job is done, token ${String(q.token)})`, 'no effect'];
    case 'extra_effects':
      return [
        `1 effect`,
        `${String(r.effects)} effects (${r.qty === undefined ? 'no qty' : `qty ${list(r.qty)}`}; tokens ${list(r.token)})`,
      ];
    case 'qty_differs':
      return [`qty ${String(q.qty)} (the job's)`, `${qty(r.qty)} (token ${String(r.token)})`];
    case 'unknown_job':
      return ['no effect (the queue has no such job)', `an effect with ${qty(r.qty)}, token ${String(r.token)}`];
    case 'token_ahead':
      return [
        `a token at most ${String(q.token)} (the job's current token)`,
        `token ${String(r.token)} (${qty(r.qty)})`,
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
