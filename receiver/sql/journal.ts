// The journal: every judged request appended in the order the receiver judged it, read by pages.
import { namedRows } from '../../platform/named-sql.js';
import { rowsOf, type Executor } from '../../platform/sql.js';
import type { Outcome } from '../rules.js';
import type { JournalEntry } from '../store.js';
import { DEFAULT_KEY, JOURNAL, storedFields } from './rows.js';

/**
 * Invariant: entries are only appended, with a `seq` that rises, so the journal replays through
 * the rules in the order the requests were judged: the rows of one statement get theirs in the
 * order given. Written inside the recording transaction, while it holds the jobs (see record.ts),
 * so a job's entries follow the order of its writes.
 */
const APPEND = namedRows<{
  jobId: string;
  key: string | null;
  qty: number | null;
  body: string | null;
  token: number;
  outcome: Outcome;
  at: number;
}>(
  ['jobId', 'key', 'qty', 'body', 'token', 'outcome', 'at'],
  `INSERT INTO ${JOURNAL} (job_id, effect_key, qty, body, token, outcome, at) VALUES @rows RETURNING seq, job_id`,
);

/**
 * Appends `entries`, each of another job, in the order given, with the fields each was given:
 * the default effect's key and fields left out as NULL.
 */
export async function appendJournal(
  executor: Executor,
  entries: readonly Omit<JournalEntry, 'seq'>[],
): Promise<JournalEntry[]> {
  const rows = entries.map((entry) => {
    const { key, qty, body } = storedFields(entry);
    const { jobId, token, outcome, at } = entry;
    return { jobId, key: key === DEFAULT_KEY ? null : key, qty, body, token, outcome, at };
  });
  // RETURNING answers rows in no promised order: each seq is matched to its entry by job.
  const seqs = new Map<string, number>();
  for (const row of rowsOf(await executor.raw(APPEND.sql(rows.length), APPEND.bind(rows)))) {
    seqs.set(String(row.job_id), Number(row.seq));
  }
  return entries.map((entry) => {
    const seq = seqs.get(entry.jobId);
    if (seq === undefined)
      throw new Error(`The journal answered no seq for job "${entry.jobId}"; nothing was recorded.`);
    return { seq, ...entry };
  });
}

export const JOURNAL_COLUMNS = ['seq', 'job_id', 'effect_key', 'qty', 'body', 'token', 'outcome', 'at'];
