// Rows of queue_jobs as the drivers return them, mapped to Jobs in one place: bigint columns
// may arrive as strings (pg), payload and result are JSON text.
import type { Row } from '../platform/sql.js';
import type { DeadReason, Job, JobStatus, JobSummary } from './types.js';

function num(value: unknown): number {
  return typeof value === 'number' ? value : Number(value);
}

function numOrNull(value: unknown): number | null {
  return value === null || value === undefined ? null : num(value);
}

export function toJsonText(value: unknown): string | null {
  return value === undefined || value === null ? null : JSON.stringify(value);
}

function fromJsonText(value: unknown): unknown {
  return value === null || value === undefined ? null : JSON.parse(String(value));
}

/** A row read without its large columns (listSummaries), as a JobSummary. */
export function rowToSummary(row: Row): JobSummary {
  const { payload: _payload, result: _result, lastError: _lastError, ...summary } = rowToJob(row);
  return summary;
}

/** The one place a row becomes a Job. */
export function rowToJob(row: Row): Job {
  return {
    id: String(row.id),
    qty: num(row.qty),
    payload: fromJsonText(row.payload),
    status: row.status as JobStatus,
    owner: (row.owner as string | null) ?? null,
    token: num(row.token),
    attempts: num(row.attempts),
    maxAttempts: num(row.max_attempts),
    priority: num(row.priority),
    leaseMs: numOrNull(row.lease_ms),
    leaseUntil: numOrNull(row.lease_until),
    deadline: numOrNull(row.deadline),
    runAt: num(row.run_at),
    result: fromJsonText(row.result),
    lastError: (row.last_error as string | null) ?? null,
    deadReason: (row.dead_reason as DeadReason | null) ?? null,
    createdAt: num(row.created_at),
    updatedAt: num(row.updated_at),
  };
}
