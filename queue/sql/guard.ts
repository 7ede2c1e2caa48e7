// The lease guard (rules 3 and 9) as SQL: the WHERE clause every fenced write of a holder
// (heartbeat, finish, fail, release) is conditional on. rules.staleReason is the same rule as a
// function; test/queue/guard.test.ts holds the two equal over a table of cases on both dialects.
import type { LateFinishPolicy, Presented } from '../types.js';

/**
 * Leased, the same token and owner, the deadline ahead, and (under `reject`, rule 2) the lease
 * valid: `now < lease_until`. Under `if-unclaimed` (rule 9) an expired lease still counts until
 * someone claims the job, which changes the token. Parameters: @id, @token, @owner, @now.
 */
export function leaseGuard(policy: LateFinishPolicy): string {
  const live = `status = 'leased' AND id = @id AND token = @token AND owner = @owner
    AND (deadline IS NULL OR deadline > @now)`;
  return policy === 'if-unclaimed' ? live : `${live} AND lease_until > @now`;
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
