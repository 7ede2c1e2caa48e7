// The end-to-end audit's rules, as one pure function of what the queue and each downstream say:
// per downstream, every done job has exactly one effect for each key expected of it (the default
// effect with the job's qty), no effect is doubled, belongs to a job the queue does not know or
// carries a token above its job's, and the receiver's totals agree with its effects. Each
// violation names the downstream, the job, the key and both sides' values.

/** What the audit needs of a queue job. */
export interface AuditedJob {
  id: string;
  qty: number;
  status: 'pending' | 'leased' | 'done' | 'dead';
  token: number;
}

/** What the audit needs of a downstream's effect. */
export interface AuditedEffect {
  jobId: string;
  /** Absent for the job's default effect. */
  key?: string | undefined;
  /** Absent for an effect sent without one (a keyed effect with only a body): qty is >= 1 when given. */
  qty?: number | undefined;
  token: number;
}

/** One downstream's side: its effects, and what every done job must have there. */
export interface AuditedDownstream {
  /** The name the gateway forwards to it by (`mailer`, `billing`). */
  name: string;
  effects: readonly AuditedEffect[];
  /**
   * The effects every done job must have at this downstream, by key; `null` is the default
   * effect. Effects with other keys are still checked for doubles, unknown jobs and tokens.
   */
  keys: ReadonlyArray<string | null>;
  /** Its `GET /totals`, when it has one: checked against its effects. */
  totals?: { effects: number; qty: number } | undefined;
}

export interface AuditInput {
  jobs: readonly AuditedJob[];
  /** The receiver's effects (the downstream named `receiver`). */
  effects: readonly AuditedEffect[];
  /** The receiver's totals. */
  totals: { effects: number; qty: number };
  /** What every done job must have at the receiver, by key (default `[null]`: the default effect). */
  keys?: ReadonlyArray<string | null>;
  /** Other downstreams, each audited on its own. */
  downstreams?: readonly AuditedDownstream[];
}

export type RuleName =
  'missing_effect' | 'extra_effects' | 'qty_differs' | 'unknown_job' | 'token_ahead' | 'totals_differ';

export interface Violation {
  rule: RuleName;
  /** The downstream it was found at (`receiver` for the receiver). */
  downstream: string;
  /** Undefined for `totals_differ`, which is about a downstream as a whole. */
  jobId?: string;
  /** The effect's key; absent for the default effect. */
  key?: string;
  /** The queue's side, as the queue reported it. */
  queue?: Record<string, unknown>;
  /** The downstream's side (the field kept its first name: the receiver was the only one). */
  receiver?: Record<string, unknown>;
  /** One sentence with both sides' values. */
  message: string;
}

/** A done job's effect applied under an earlier lease than the one that finished the job. */
export interface EarlierToken {
  downstream: string;
  jobId: string;
  key?: string;
  /** The token the effect was applied with. */
  token: number;
  /** The job's token when it was finished. */
  finishedWith: number;
}

/** One downstream's figures, by key. */
export interface DownstreamCounts {
  name: string;
  effects: number;
  /** The keys expected of every done job (`null`: the default effect). */
  expected: Array<string | null>;
  /** Effects per key (`""` for the default effect). */
  byKey: Record<string, number>;
}

export interface AuditCounts {
  jobs: number;
  done: number;
  /** The receiver's effects. */
  effects: number;
  /** Effects of jobs that are not done (yet), at every downstream: not violations, but worth seeing after a run. */
  effectsOfUnfinishedJobs: number;
  /** The receiver's totals. */
  totals: { effects: number; qty: number };
  /** Every downstream audited, the receiver first. */
  downstreams: DownstreamCounts[];
}

export interface AuditReport {
  ok: boolean;
  counts: AuditCounts;
  /** The rules checked, in words, in the order they are checked. */
  checked: readonly string[];
  violations: Violation[];
  /**
   * Effects of done jobs applied with a token below the one the job finished with: the holder
   * that sent them lost its lease before finishing, and the finisher's send was a duplicate.
   * Not a violation (the effect happened once), but reported beside them.
   */
  earlierTokens: EarlierToken[];
}

export const RECEIVER = 'receiver';

export const AUDIT_RULES: readonly string[] = [
  'every done job has exactly one effect for each key expected of it, the default effect with its qty',
  'no effect is recorded twice for one job and key',
  'no effect belongs to a job the queue does not know',
  "no effect carries a token above its job's current token",
  "the receiver's totals agree with its effects",
];

/**
 * An id as the report prints it: in double quotes, with every control and format character
 * escaped (newline, ESC, DEL, the C1 controls, bidirectional overrides...), so that an id
 * cannot end its line, start a forged one, or move the terminal's cursor.
 */
export function quoted(id: string): string {
  return JSON.stringify(id).replace(
    /[\p{Cc}\p{Cf}\u2028\u2029]/gu,
    (c) => `\\u${c.codePointAt(0)!.toString(16).padStart(4, '0')}`,
  );
}

/** `""` for the default effect, the key otherwise: how counts and groups name an effect. */
export const keyName = (key: string | null | undefined): string => key ?? '';

export function auditRules(input: AuditInput): AuditReport {
  const { jobs } = input;
  const sides: AuditedDownstream[] = [
    { name: RECEIVER, effects: input.effects, totals: input.totals, keys: input.keys ?? [null] },
    ...(input.downstreams ?? []),
  ];
  const known = new Map(jobs.map((job) => [job.id, job]));
  const violations: Violation[] = [];
  const earlierTokens: EarlierToken[] = [];
  let effectsOfUnfinishedJobs = 0;
  for (const side of sides) {
    violations.push(...expectedEffects(side, jobs), ...doubled(side, known));
    const found = perEffect(side, known);
    violations.push(...found.violations);
    earlierTokens.push(...found.earlier);
    effectsOfUnfinishedJobs += found.unfinished;
    if (side.totals) violations.push(...totalsRule(side, side.totals));
  }
  return {
    ok: violations.length === 0,
    counts: {
      jobs: jobs.length,
      done: jobs.filter((job) => job.status === 'done').length,
      effects: input.effects.length,
      effectsOfUnfinishedJobs,
      totals: input.totals,
      downstreams: sides.map(countsOf),
    },
    checked: AUDIT_RULES,
    violations,
    earlierTokens,
  };
}

/** How a message names the place and the effect: `the receiver`, `downstream "mailer"`; `effect "email"`. */
const placeOf = (side: { name: string }) =>
  side.name === RECEIVER ? 'the receiver' : `downstream ${quoted(side.name)}`;
const effectWord = (key: string | null | undefined) => (key == null ? 'effect' : `effect ${quoted(key)}`);
const keyed = (key: string | null | undefined) => (key == null ? {} : { key });
/** An effect's qty as a side shows it: `{qty}`, or nothing for an effect sent without one. */
const qtyField = (effect: AuditedEffect) => (effect.qty === undefined ? {} : { qty: effect.qty });
/** The qty of each of `effects`, null for one sent without; left out when none has one. */
const qtyList = (effects: readonly AuditedEffect[]) =>
  effects.every((e) => e.qty === undefined) ? {} : { qty: effects.map((e) => e.qty ?? null) };
/** How a message says an effect's qty: `qty 3`, or `no qty`. */
const qtyWords = (effect: AuditedEffect) => (effect.qty === undefined ? 'no qty' : `qty ${effect.qty}`);

function groupOf(side: AuditedDownstream): Map<string, AuditedEffect[]> {
  const groups = new Map<string, AuditedEffect[]>();
  for (const effect of side.effects) {
    const id = JSON.stringify([effect.jobId, keyName(effect.key)]);
    groups.set(id, [...(groups.get(id) ?? []), effect]);
  }
  return groups;
}

/** Every done job has each expected key once; the default effect carries the job's qty. */
function expectedEffects(side: AuditedDownstream, jobs: readonly AuditedJob[]): Violation[] {
  const groups = groupOf(side);
  const violations: Violation[] = [];
  for (const job of jobs) {
    if (job.status !== 'done') continue;
    const queue = { status: job.status, qty: job.qty, token: job.token };
    for (const key of side.keys) {
      const mine = groups.get(JSON.stringify([job.id, keyName(key)])) ?? [];
      const base = { downstream: side.name, jobId: job.id, ...keyed(key), queue };
      if (mine.length === 0) {
        violations.push({
          ...base,
          rule: 'missing_effect',
          receiver: { effects: 0 },
          message: `job ${quoted(job.id)} is done (qty ${job.qty}, token ${job.token}) but ${placeOf(side)} has no ${effectWord(key)} for it`,
        });
      } else if (mine.length > 1) {
        violations.push({ ...base, ...doubledOf(side, mine) });
      } else if (key === null && mine[0]!.qty !== job.qty) {
        violations.push({
          ...base,
          rule: 'qty_differs',
          receiver: { ...qtyField(mine[0]!), token: mine[0]!.token },
          message: `job ${quoted(job.id)} has qty ${job.qty} in the queue, but its effect at ${placeOf(side)} has ${qtyWords(mine[0]!)}`,
        });
      }
    }
  }
  return violations;
}

/**
 * One effect per job and key, for the effects `expectedEffects` does not look at (another key, a
 * job not done): a downstream that lists two has recorded it twice.
 */
function doubled(side: AuditedDownstream, known: ReadonlyMap<string, AuditedJob>): Violation[] {
  const expected = new Set(side.keys.map(keyName));
  const violations: Violation[] = [];
  for (const mine of groupOf(side).values()) {
    const { jobId, key } = mine[0]!;
    if (mine.length < 2 || (known.get(jobId)?.status === 'done' && expected.has(keyName(key)))) continue;
    violations.push({ downstream: side.name, jobId, ...keyed(key), ...doubledOf(side, mine) });
  }
  return violations;
}

function doubledOf(
  side: AuditedDownstream,
  mine: readonly AuditedEffect[],
): Pick<Violation, 'rule' | 'receiver' | 'message'> {
  const { jobId, key } = mine[0]!;
  return {
    rule: 'extra_effects',
    receiver: { effects: mine.length, ...qtyList(mine), token: mine.map((e) => e.token) },
    message: `job ${quoted(jobId)} has ${mine.length} of its ${effectWord(key)} at ${placeOf(side)}, not 1`,
  };
}

/** Each effect against its job: known, its token issued by a claim; for a done job, the finishing lease's or earlier. */
function perEffect(
  side: AuditedDownstream,
  known: ReadonlyMap<string, AuditedJob>,
): { violations: Violation[]; earlier: EarlierToken[]; unfinished: number } {
  const violations: Violation[] = [];
  const earlier: EarlierToken[] = [];
  let unfinished = 0;
  for (const effect of side.effects) {
    const job = known.get(effect.jobId);
    const receiver = { ...qtyField(effect), token: effect.token };
    const base = { downstream: side.name, jobId: effect.jobId, ...keyed(effect.key), receiver };
    if (!job) {
      violations.push({
        ...base,
        rule: 'unknown_job',
        queue: { job: null },
        message: `${placeOf(side)} has an ${effectWord(effect.key)} for job ${quoted(effect.jobId)} (${qtyWords(effect)}, token ${effect.token}), which the queue does not know`,
      });
      continue;
    }
    if (job.status !== 'done') unfinished++;
    if (effect.token > job.token) {
      violations.push({
        ...base,
        rule: 'token_ahead',
        queue: { status: job.status, token: job.token },
        message: `the ${effectWord(effect.key)} for job ${quoted(effect.jobId)} at ${placeOf(side)} carries token ${effect.token}, above the job's current token ${job.token}: no claim ever issued it`,
      });
    } else if (job.status === 'done' && effect.token < job.token) {
      earlier.push({
        downstream: side.name,
        jobId: effect.jobId,
        ...keyed(effect.key),
        token: effect.token,
        finishedWith: job.token,
      });
    }
  }
  return { violations, earlier, unfinished };
}

function totalsRule(side: AuditedDownstream, totals: { effects: number; qty: number }): Violation[] {
  // An effect sent without qty adds nothing to the sum, as the receiver's totals count it.
  const sum = side.effects.reduce((total, effect) => total + (effect.qty ?? 0), 0);
  if (totals.effects === side.effects.length && totals.qty === sum) return [];
  return [
    {
      rule: 'totals_differ',
      downstream: side.name,
      receiver: { totals, listed: { effects: side.effects.length, qty: sum } },
      message: `${side.name === RECEIVER ? "the receiver's" : `${placeOf(side)}'s`} totals say ${totals.effects} effects, qty ${totals.qty}; its effects add up to ${side.effects.length}, qty ${sum}`,
    },
  ];
}

function countsOf(side: AuditedDownstream): DownstreamCounts {
  const byKey: Record<string, number> = {};
  for (const effect of side.effects) byKey[keyName(effect.key)] = (byKey[keyName(effect.key)] ?? 0) + 1;
  return { name: side.name, effects: side.effects.length, expected: [...side.keys], byKey };
}
