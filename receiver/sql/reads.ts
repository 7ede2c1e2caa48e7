// The receiver's reads: effects by jobId and key, the totals row and the journal, by pages, through knex.
import type { Knex } from 'knex';
import type { Row } from '../../platform/sql.js';
import type { Effect } from '../rules.js';
import type { EffectPageQuery, JournalEntry, PageQuery, Totals } from '../store.js';
import { JOURNAL_COLUMNS } from './journal.js';
import { DEFAULT_KEY, EFFECT_COLUMNS, EFFECTS, JOURNAL, TOTALS, toEffect, toJournalEntry } from './rows.js';

/**
 * Effects by jobId, then key (the default effect's '' before every key): all of them, or `limit`
 * of them after the effect `after`, of every job or of `jobId` alone.
 */
export async function listEffects(knex: Knex, page: EffectPageQuery = {}): Promise<Effect[]> {
  const query = knex(EFFECTS).select(EFFECT_COLUMNS.split(', ')).orderBy(['job_id', 'effect_key']);
  if (page.jobId !== undefined) query.where('job_id', page.jobId);
  if (page.after !== undefined) {
    const after = typeof page.after === 'string' ? { jobId: page.after } : page.after;
    const afterKey = after.key ?? DEFAULT_KEY;
    query.where((later) =>
      later
        .where('job_id', '>', after.jobId)
        .orWhere((sameJob) => sameJob.where('job_id', after.jobId).andWhere('effect_key', '>', afterKey)),
    );
  }
  if (page.limit !== undefined) query.limit(page.limit);
  return ((await query) as Row[]).map(toEffect);
}

/** The effect of `(jobId, key)`; `key` left out is the job's default effect. */
export async function getEffect(knex: Knex, jobId: string, key?: string): Promise<Effect | undefined> {
  const row = (await knex(EFFECTS)
    .select(EFFECT_COLUMNS.split(', '))
    .where({ job_id: jobId, effect_key: key ?? DEFAULT_KEY })
    .first()) as Row | undefined;
  return row && toEffect(row);
}

/** One row, kept by every applied effect (totals.ts) and never past 2^53 - 1. */
export async function readTotals(knex: Knex): Promise<Totals> {
  const row = (await knex(TOTALS).select('effects', 'qty').where({ id: 1 }).first()) as
    { effects: number | string; qty: number | string } | undefined;
  return { effects: Number(row?.effects ?? 0), qty: Number(row?.qty ?? 0) };
}

/** Entries by seq: all of them, or `limit` of them after the seq `after`. */
export async function readJournal(knex: Knex, page: PageQuery<number> = {}): Promise<JournalEntry[]> {
  const query = knex(JOURNAL).select(JOURNAL_COLUMNS).orderBy('seq');
  if (page.after !== undefined) query.where('seq', '>', page.after);
  if (page.limit !== undefined) query.limit(page.limit);
  return ((await query) as Row[]).map(toJournalEntry);
}
