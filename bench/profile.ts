// Where the time of one queue library cycle goes: the limit and several ways of running the
// same cycle, interleaved round by round like the main table, each timed per statement inside
// the driver; and what a claim costs as the backlog of pending jobs grows.
import { join } from 'node:path';
import { claimManyIn } from '../queue/sql/index.js';
import { openBare } from './bare-sqlite.js';
import {
  SHIPPED,
  WITH_STATUS_INDEX,
  bareVariant,
  breakdownOf,
  preparedExecutor,
  storeVariant,
  type Breakdown,
  type CycleVariant,
  type Schema,
} from './cycle-variants.js';
import { LIMIT_TABLE, LIMIT_UPDATE } from './limit.js';
import { perSecond, runLoops } from './loops.js';
import { QueueDb, interleave, type RoundContext, type Throughput } from './measure.js';
import { StatementClock } from './statement-clock.js';

export interface ProfileOptions {
  rounds: number;
  windowMs: number;
  sliceMs: number;
  backlog: number;
  backlogSizes: number[];
}

export interface VariantRound {
  throughput: Throughput;
  breakdown: Breakdown;
}

export interface ProfileRecord {
  options: ProfileOptions;
  variants: { id: string; label: string }[];
  /** rounds[r][variantId] */
  rounds: Record<string, VariantRound>[];
  /** Milliseconds per claim (quarantine + claim UPDATE) by schema and pending jobs. */
  claimCost: { schema: string; pending: number; msPerClaim: number }[];
}

/** The limit transaction on the bare driver, timed per statement like the cycles. */
async function limitVariant(db: string): Promise<CycleVariant> {
  const bare = await openBare(db);
  await bare.exec(LIMIT_TABLE);
  const clock = new StatementClock();
  clock.wrap(bare.handle as unknown as Record<string, unknown>);
  let cycles = 0;
  let wallMs = 0;
  return {
    id: 'limit',
    label: 'one-row transaction, bare driver',
    prepare: async () => undefined,
    resetBreakdown() {
      clock.reset();
      cycles = 0;
      wallMs = 0;
    },
    async slice(ms) {
      const statementsBefore = clock.statements();
      const result = await runLoops(1, ms, async () => {
        await bare.run('BEGIN IMMEDIATE');
        await bare.run(LIMIT_UPDATE);
        await bare.run('COMMIT');
        return true;
      });
      cycles += result.jobs;
      wallMs += result.elapsedMs;
      return {
        ...result,
        transactions: null,
        statements: clock.statements() - statementsBefore,
        requests: null,
        cpu: {},
        requestsBy: {},
      };
    },
    breakdown: () => breakdownOf(clock, cycles, wallMs),
    close: () => bare.close(),
  };
}

async function openVariants(dir: string): Promise<CycleVariant[]> {
  const specs: [string, () => Promise<CycleVariant>][] = [
    ['limit', () => limitVariant(join(dir, 'profile-limit.sqlite'))],
    [
      'store',
      () =>
        storeVariant(
          join(dir, 'profile-store.sqlite'),
          'store',
          "store's SQL on the store's write path (platform/sqlite.ts: statements prepared once, straight on the connection)",
        ),
    ],
    [
      'bare-prep',
      () =>
        bareVariant(
          join(dir, 'profile-bare-prep.sqlite'),
          'bare-prep',
          "store's SQL on the bare driver, prepared once",
          true,
        ),
    ],
    [
      'bare',
      () =>
        bareVariant(
          join(dir, 'profile-bare.sqlite'),
          'bare',
          "store's SQL on the bare driver, prepared on every call",
          false,
        ),
    ],
  ];
  const opened: CycleVariant[] = [];
  try {
    for (const [, open] of specs) opened.push(await open());
  } catch (err) {
    for (const v of opened) await v.close().catch(() => undefined);
    throw err;
  }
  return opened;
}

export async function runProfile(
  dir: string,
  options: ProfileOptions,
  progress: (line: string) => void,
): Promise<ProfileRecord> {
  const variants = await openVariants(dir);
  try {
    const rounds: Record<string, VariantRound>[] = [];
    let limitTxPerSec = perSecond(await variants[0]!.slice(Math.min(options.windowMs, 500)));
    for (let round = 1; round <= options.rounds; round++) {
      const ctx: RoundContext = { round, windowMs: options.windowMs, limitTxPerSec, backlog: options.backlog };
      for (const v of variants) v.resetBreakdown();
      const results = await interleave(variants, ctx, options.sliceMs);
      limitTxPerSec = results[0]!.perSec;
      const record: Record<string, VariantRound> = {};
      variants.forEach((v, i) => (record[v.id] = { throughput: results[i]!, breakdown: v.breakdown() }));
      rounds.push(record);
      progress(
        `profile round ${round}/${options.rounds}: ${variants.map((v) => `${v.id} ${record[v.id]!.throughput.perSec.toFixed(0)}`).join(', ')}`,
      );
    }
    const claimCost = [];
    for (const [name, schema] of [
      ['shipped', SHIPPED],
      ['with the status index 002 dropped', WITH_STATUS_INDEX],
    ] as const) {
      claimCost.push(
        ...(await claimCostByBacklog(
          join(dir, `profile-backlog-${schema.changes.length}.sqlite`),
          schema,
          name,
          options.backlogSizes,
        )),
      );
    }
    return { options, variants: variants.map(({ id, label }) => ({ id, label })), rounds, claimCost };
  } finally {
    for (const variant of variants) await variant.close().catch(() => undefined);
  }
}

/**
 * CPU cost of the claim step alone as pending jobs pile up: `CLAIMS` claims (quarantine +
 * claim UPDATE, statements prepared once) inside one transaction that is rolled back, so no
 * fsync is timed.
 */
async function claimCostByBacklog(db: string, schema: Schema, name: string, sizes: number[]) {
  const CLAIMS = 100;
  const queue = await QueueDb.open(db);
  for (const sql of schema.changes) await queue.execute(sql);
  const bare = await openBare(db);
  const executor = preparedExecutor(bare);
  const out: { schema: string; pending: number; msPerClaim: number }[] = [];
  try {
    for (const pending of sizes) {
      await queue.topUp(pending + CLAIMS, 'backlog');
      await bare.run('BEGIN IMMEDIATE');
      const started = performance.now();
      for (let i = 0; i < CLAIMS; i++) {
        await claimManyIn(executor, 'sqlite', 'bench-backlog', 30_000, 1, Date.now());
      }
      const ms = (performance.now() - started) / CLAIMS;
      await bare.run('ROLLBACK');
      out.push({ schema: name, pending, msPerClaim: ms });
    }
  } finally {
    await executor.release();
    await bare.close();
    await queue.close();
  }
  return out;
}
