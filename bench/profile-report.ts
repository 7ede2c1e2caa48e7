// The "where the time goes" section: each cycle variant against the limit of its round, the
// milliseconds each statement kind spends inside the driver, and the claim cost by backlog.
import type { ProfileRecord } from './profile.js';
import { table } from './report.js';
import { ratios, summarize, type Summary } from './stats.js';

function fmt(value: number | null | undefined, digits: number): string {
  return value === null || value === undefined || !Number.isFinite(value) ? '-' : value.toFixed(digits);
}

function med(values: number[]): number | null {
  return summarize(values)?.median ?? null;
}

export interface ProfileSummary {
  variants: {
    id: string;
    label: string;
    perSec: Summary | null;
    ratioToLimit: Summary | null;
    txPerJob: number | null;
    statementsPerCycle: number | null;
    wallMsPerCycle: number | null;
    driverMsPerCycle: number | null;
    outsideDriverMsPerCycle: number | null;
    msPerCall: Record<string, number | null>;
  }[];
  claimCost: ProfileRecord['claimCost'];
}

export function summarizeProfile(profile: ProfileRecord): ProfileSummary {
  const limitRates = profile.rounds.map((r) => r.limit?.throughput.perSec);
  const variants = profile.variants.map(({ id, label }) => {
    const rounds = profile.rounds.map((r) => r[id]!);
    const rates = rounds.map((r) => r.throughput.perSec);
    const kinds = new Set(rounds.flatMap((r) => r.breakdown.kinds.map((k) => k.kind)));
    const msPerCall: Record<string, number | null> = {};
    for (const kind of kinds) {
      msPerCall[kind] = med(rounds.map((r) => r.breakdown.kinds.find((k) => k.kind === kind)?.msPerCall ?? Number.NaN));
    }
    const wall = med(rounds.map((r) => r.breakdown.wallMsPerCycle));
    const driver = med(rounds.map((r) => r.breakdown.driverMsPerCycle));
    return {
      id,
      label,
      perSec: summarize(rates),
      ratioToLimit: summarize(ratios(rates, limitRates)),
      txPerJob: med(rounds.map((r) => r.throughput.txPerJob ?? Number.NaN)),
      statementsPerCycle: med(rounds.map((r) => r.breakdown.statementsPerCycle)),
      wallMsPerCycle: wall,
      driverMsPerCycle: driver,
      outsideDriverMsPerCycle: med(rounds.map((r) => r.breakdown.wallMsPerCycle - r.breakdown.driverMsPerCycle)),
      msPerCall,
    };
  });
  return { variants, claimCost: profile.claimCost };
}

export function renderProfile(profile: ProfileRecord, summary: ProfileSummary): string {
  const o = profile.options;
  const kinds = [...new Set(summary.variants.flatMap((v) => Object.keys(v.msPerCall)))];
  const pendings = [...new Set(summary.claimCost.map((c) => c.pending))];
  const schemas = [...new Set(summary.claimCost.map((c) => c.schema))];
  return [
    `Where the time of one library cycle goes (${o.rounds} rounds, ${o.windowMs} ms per variant and round in slices taken in turn, 1 worker, backlog ${o.backlog};`,
    'driver time = from the call into sqlite3 to its callback, fsync included; outside driver = knex and JavaScript):',
    table(
      ['variant', 'per s', 'ratio to limit', 'tx/job', 'stmt', 'wall ms', 'in driver ms', 'outside driver ms'],
      summary.variants.map((v) => [
        `${v.id}: ${v.label}`,
        fmt(v.perSec?.median, 0),
        v.ratioToLimit
          ? `${fmt(v.ratioToLimit.median, 2)} [${fmt(v.ratioToLimit.min, 2)}..${fmt(v.ratioToLimit.max, 2)}]`
          : '-',
        fmt(v.txPerJob, 2),
        fmt(v.statementsPerCycle, 1),
        fmt(v.wallMsPerCycle, 3),
        fmt(v.driverMsPerCycle, 3),
        fmt(v.outsideDriverMsPerCycle, 3),
      ]),
    ),
    '',
    'Milliseconds per call inside the driver, by statement (median over rounds):',
    table(
      ['statement', ...summary.variants.map((v) => v.id)],
      kinds.map((kind) => [kind, ...summary.variants.map((v) => fmt(v.msPerCall[kind], 3))]),
    ),
    '',
    'Claim step alone (quarantine UPDATE + claim UPDATE, no commit), ms per claim, by pending jobs:',
    table(
      ['pending jobs', ...schemas],
      pendings.map((p) => [
        String(p),
        ...schemas.map((s) => fmt(summary.claimCost.find((c) => c.pending === p && c.schema === s)?.msPerClaim, 3)),
      ]),
    ),
  ].join('\n');
}
