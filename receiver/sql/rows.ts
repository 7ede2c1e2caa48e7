// The receiver's tables and their rows mapped to Effects and JournalEntries, in one place.
// Number(): PostgreSQL's driver returns bigint columns as strings; SQLite returns numbers.
import type { Row } from '../../platform/sql.js';
import type { Effect, EffectRequest, Outcome } from '../rules.js';
import type { JournalEntry } from '../store.js';

export const EFFECTS = 'receiver_effects';
/** One row per job: its highest token, the fence every one of its effects is judged against. */
export const JOBS = 'receiver_jobs';
export const JOURNAL = 'receiver_journal';
export const TOTALS = 'receiver_totals';
export const EFFECT_COLUMNS = 'job_id, effect_key, qty, body, token, applied_at';

/** The key a job's default effect is stored under: a real key is never empty. */
export const DEFAULT_KEY = '';

/** What the row holds of an effect's own fields: a key, a qty and a body only when given. */
function fieldsOf(row: Row): Pick<Effect, 'key' | 'qty' | 'body'> {
  return {
    ...(row.effect_key === null || row.effect_key === undefined || row.effect_key === DEFAULT_KEY
      ? {}
      : { key: String(row.effect_key) }),
    ...(row.qty === null || row.qty === undefined ? {} : { qty: Number(row.qty) }),
    ...(row.body === null || row.body === undefined ? {} : { body: JSON.parse(String(row.body)) as unknown }),
  };
}

export const toEffect = (row: Row): Effect => ({
  jobId: String(row.job_id),
  ...fieldsOf(row),
  token: Number(row.token),
  appliedAt: Number(row.applied_at),
});

export const toJournalEntry = (row: Row): JournalEntry => ({
  seq: Number(row.seq),
  jobId: String(row.job_id),
  ...fieldsOf(row),
  token: Number(row.token),
  outcome: row.outcome as Outcome,
  at: Number(row.at),
});

/**
 * A request's own fields as the tables keep them: the default key as '', a qty or body left out
 * as NULL, and the body as the JSON text of its canonical form (the store canonicalises it first),
 * so two bodies are the same exactly when their texts are.
 */
export function storedFields(request: Pick<EffectRequest, 'key' | 'qty' | 'body'>): {
  key: string;
  qty: number | null;
  body: string | null;
} {
  return {
    key: request.key ?? DEFAULT_KEY,
    qty: request.qty ?? null,
    body: request.body === undefined ? null : JSON.stringify(request.body),
  };
}
