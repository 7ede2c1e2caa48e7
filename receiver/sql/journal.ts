// The journal: every judged request appended in the order the receiver judged it, read by pages.
import { named } from '../../platform/named-sql.js';
import { rowsOf, type Executor } from '../../platform/sql.js';
import type { Outcome } from '../rules.js';
import type { JournalEntry } from '../store.js';
import { DEFAULT_KEY, JOURNAL, storedFields } from './rows.js';

/**
 * Invariant: entries are only appended, with a `seq` that rises, so the journal replays through
 * the rules in the order the requests were judged. Written inside the recording transaction,
 * while it holds the job (see record.ts), so a job's entries follow the order of its writes.
 */
const APPEND = named<{
  jobId: string;
  key: string | null;
  qty: number | null;
  body: string | null;
  token: number;
  outcome: Outcome;
  at: number;
}>(
  `INSERT INTO ${JOURNAL} (job_id, effect_key, qty, body, token, outcome, at)
  VALUES (@jobId, @key, @qty, @body, @token, @outcome, @at) RETURNING seq`,
);

/** Appends `entry` with the fields it was given: the default effect's key and fields left out as NULL. */
export async function appendJournal(executor: Executor, entry: Omit<JournalEntry, 'seq'>): Promise<JournalEntry> {
  const { key, qty, body } = storedFields(entry);
  const { jobId, token, outcome, at } = entry;
  const params = { jobId, key: key === DEFAULT_KEY ? null : key, qty, body, token, outcome, at };
  const row = rowsOf(await executor.raw(APPEND.sql, APPEND.bind(params)))[0];
  return { seq: Number(row?.seq), ...entry };
}

export const JOURNAL_COLUMNS = ['seq', 'job_id', 'effect_key', 'qty', 'body', 'token', 'outcome', 'at'];
