// The receiver's tables and their rows mapped to Effects and JournalEntries, in one place.
// Number(): PostgreSQL's driver returns bigint columns as strings; SQLite returns numbers.
import type { Row } from '../../platform/sql.js';
import type { Effect, JobState, Outcome } from '../rules.js';
import type { JournalEntry } from '../store.js';

export const EFFECTS = 'receiver_effects';
export const JOURNAL = 'receiver_journal';
export const TOTALS = 'receiver_totals';
export const EFFECT_COLUMNS = 'job_id, qty, token, applied_at, highest_token';

export const toEffect = (row: Row): Effect => ({
  jobId: String(row.job_id),
  qty: Number(row.qty),
  token: Number(row.token),
  appliedAt: Number(row.applied_at),
});

export const toJobState = (row: Row): JobState => ({ effect: toEffect(row), highestToken: Number(row.highest_token) });

export const toJournalEntry = (row: Row): JournalEntry => ({
  seq: Number(row.seq),
  jobId: String(row.job_id),
  qty: Number(row.qty),
  token: Number(row.token),
  outcome: row.outcome as Outcome,
  at: Number(row.at),
});
