// The lease guard (rules 3 and 9) as SQL: the WHERE clause every fenced write of a holder
// (heartbeat, finish, fail, release, and the batched finish) is conditional on. rules.staleReason
// is the same rule as a function; test/queue/sql-rules.test.ts holds the two equal over a table of
// cases on both dialects.
import type { LateFinishPolicy, Presented } from '../types.js';

/**
 * What the guard compares a row's columns with: the SQL of the presented id, token and owner,
 * and of `now`. A single write binds them as parameters; the batched finish takes id and token
 * from its batch's rows.
 */
export interface GuardOperands {
  id: string;
  token: string;
  owner: string;
  now: string;
}

const PARAMETERS: GuardOperands = { id: '@id', token: '@token', owner: '@owner', now: '@now' };

/**
 * Leased, the same token and owner, the deadline ahead, and (under `reject`, rule 2) the lease
 * valid: `now < lease_until`. Under `if-unclaimed` (rule 9) an expired lease still counts until
 * someone claims the job, which changes the token. Parameters by default: @id, @token, @owner, @now.
 */
export function leaseGuard(policy: LateFinishPolicy, operands: GuardOperands = PARAMETERS): string {
  const { id, token, owner, now } = operands;
  const live = `status = 'leased' AND id = ${id} AND token = ${token} AND owner = ${owner}
    AND (deadline IS NULL OR deadline > ${now})`;
  return policy === 'if-unclaimed' ? live : `${live} AND lease_until > ${now}`;
}

export interface GuardParams {
  [name: string]: string | number;
  id: string;
  token: number;
  owner: string;
  now: number;
}

export function guardParams(id: string, presented: Presented, now: number): GuardParams {
  return { id, token: presented.token, owner: presented.owner, now };
}
