// The worker's decisions as pure functions: how often to renew, when the worker must assume
// its lease has ended, which answers mean "not yours any more", how much to claim, when a
// kept-alive connection is still safe to reuse, and where a generation's output lives.
import { createHash } from 'node:crypto';
import { GatewayError } from '../gateway/client.js';
import { QueueError } from '../queue/client.js';
import type { CurrentLease, Job, Lease, StaleReason } from '../queue/types.js';
import type { LossReason } from './errors.js';
import type { WorkerEventBody } from './events.js';

/** A third of the lease, so two renewals can fail before it runs out; never more often than 10/s. */
export function heartbeatIntervalMs(leaseMs: number): number {
  return Math.max(100, Math.floor(leaseMs / 3));
}

/**
 * The worker's estimate of when the lease ends, on its own clock. The queue set
 * `leaseUntil = now + leaseMs` when the request reached it, which was after `sentAt`, so
 * `sentAt + leaseMs` never overshoots — and it needs no agreement between the two clocks.
 * Only when the deadline capped the lease (`leaseUntil === deadline`) is the queue's
 * `leaseUntil` itself used, which assumes the clocks roughly agree.
 */
export function estimateLeaseEnd(
  sentAt: number,
  leaseMs: number,
  lease: Pick<Lease, 'leaseUntil' | 'deadline'>,
): number {
  const byLength = sentAt + leaseMs;
  const capped = lease.deadline !== null && lease.leaseUntil >= lease.deadline;
  return capped ? Math.min(byLength, lease.leaseUntil) : byLength;
}

/**
 * Where a lease stands in its keeper. `claimed`: received, its handler not started. `held`:
 * the handler runs and the lease is renewed on its timer. `settling`: renewals have stopped
 * and the finish, fail or release is under way. `refused`: a service refused it, and the
 * worker reads why (a cancel?); no estimate of its end can come first any more. `lost`: the
 * loss is decided (by a refusal, or by the worker's estimate of the lease's end) and reported.
 * `ended`: the queue took the finish, fail or release, or a release was given up.
 */
export type LeaseState = 'claimed' | 'held' | 'settling' | 'refused' | 'lost' | 'ended';

/** What moves a lease from one state to the next. */
export type LeaseStep = 'start' | 'stop' | 'refuse' | 'lose' | 'settle';

const LEASE_STEPS: Readonly<Record<LeaseState, Partial<Record<LeaseStep, LeaseState>>>> = {
  claimed: { start: 'held', stop: 'settling' },
  held: { stop: 'settling', refuse: 'refused', lose: 'lost' },
  settling: { refuse: 'refused', lose: 'lost', settle: 'ended' },
  // Stopping a refused or lost lease only waits for what is in flight; a second verdict only refines the first.
  refused: { stop: 'refused', refuse: 'refused', lose: 'lost' },
  lost: { stop: 'lost', refuse: 'lost', lose: 'lost' },
  ended: {},
};

/** The state `step` leads to from `state`, or undefined when the step is not one this state takes. */
export function nextLeaseState(state: LeaseState, step: LeaseStep): LeaseState | undefined {
  return LEASE_STEPS[state][step];
}

/**
 * Whether a send should renew the lease first: when less is left of it than one heartbeat
 * interval plus the time a send is expected to take — a margin in which a scheduled renewal
 * can still land — but never more than `leaseMs - heartbeatMs`, what a renewal that answered
 * within its timeout (one interval) leaves: renewing again could not give more. While renewals
 * keep to their schedule at least that much is left at any moment, so only a lease whose
 * renewals have been failing or late (a paused process, a claim that waited), or a send
 * slower than about an interval just before a renewal is due, is short.
 */
export function leaseIsShort(input: {
  leftMs: number;
  leaseMs: number;
  heartbeatMs: number;
  expectedSendMs: number;
}): boolean {
  const { leftMs, leaseMs, heartbeatMs, expectedSendMs } = input;
  return leftMs < Math.min(heartbeatMs + expectedSendMs, leaseMs - heartbeatMs);
}

export interface Refusal {
  /** The service's error code: `stale_lease`, `unknown_job`, `fenced`. */
  code: string;
  status: number;
  reason: LossReason;
  current: CurrentLease | undefined;
  message: string;
}

const STALE_REASONS: ReadonlySet<string> = new Set<StaleReason>([
  'not_leased',
  'token_mismatch',
  'owner_mismatch',
  'deadline_passed',
  'lease_expired',
]);

/**
 * The answers that mean the lease is not this worker's any more: the queue's (or the
 * gateway's, on the queue's word) `stale_lease` and `unknown_job`, and the receiver's `fenced`
 * (it has seen a newer token for the job). Anything else — unreachable, 5xx, a conflict — is
 * not a verdict on the lease, and returns null.
 */
export function refusalOf(err: unknown): Refusal | null {
  if (!(err instanceof QueueError || err instanceof GatewayError)) return null;
  const details = err.details as { reason?: unknown; current?: unknown };
  switch (err.code) {
    case 'stale_lease': {
      const reason =
        typeof details.reason === 'string' && STALE_REASONS.has(details.reason)
          ? (details.reason as StaleReason)
          : 'not_leased';
      return { code: err.code, status: err.status, reason, current: currentOf(details.current), message: err.message };
    }
    case 'unknown_job':
      return { code: err.code, status: err.status, reason: 'unknown_job', current: undefined, message: err.message };
    case 'fenced':
      return { code: err.code, status: err.status, reason: 'fenced', current: undefined, message: err.message };
    default:
      return null;
  }
}

/** The timeline event for a refusal of `op`, with the service's verdict. */
export function refusedEvent(
  op: 'renew' | 'send' | 'finish' | 'fail' | 'release',
  job: string,
  token: number,
  refusal: Refusal,
): WorkerEventBody {
  return {
    event: 'refused',
    op,
    job,
    token,
    status: refusal.status,
    code: refusal.code,
    reason: refusal.reason,
    ...(refusal.current ? { current: refusal.current } : {}),
    error: refusal.message,
  };
}

/**
 * A finish retried after a lost answer is refused as `not_leased` when the first attempt did
 * land: the job is `done` under this very owner and token. That is success, not a loss.
 */
export function finishedEarlierBy(refusal: Refusal, owner: string, token: number): boolean {
  const current = refusal.current;
  return (
    refusal.reason === 'not_leased' && current?.status === 'done' && current.owner === owner && current.token === token
  );
}

/**
 * A release retried after a lost answer is refused as `not_leased` when the first attempt did
 * land: the job is `pending` again at this very token (only its holder can release or fail it).
 */
export function releasedEarlierBy(refusal: Refusal, token: number): boolean {
  return refusal.reason === 'not_leased' && refusal.current?.status === 'pending' && refusal.current.token === token;
}

/**
 * A fail retried after a lost answer is refused as `not_leased` when the first attempt did land:
 * the job `pending` again (retried later) or `dead` (its last attempt, or past its deadline) at
 * this very token. Only the job's record tells that fail from another end at the same token (an
 * operator's cancel): see `failLanded`.
 */
export function failedEarlierBy(refusal: Refusal, token: number): boolean {
  const current = refusal.current;
  return (
    refusal.reason === 'not_leased' &&
    (current?.status === 'pending' || current?.status === 'dead') &&
    current.token === token
  );
}

/**
 * The job as this fail leaves it: ended under this owner and token with this error, and not by a
 * cancel, which a fail never is. (A cancel that kept an earlier attempt's identical error, of a
 * lease whose own fail never landed, would pass for it: the job is dead with that error either way.)
 */
export function failLanded(job: Job, owner: string, token: number, error: string): boolean {
  return (
    job.owner === owner &&
    job.token === token &&
    job.lastError === error &&
    (job.status === 'pending' || (job.status === 'dead' && job.deadReason !== 'cancelled'))
  );
}

/** The timeline event for a lease the worker received, from a claim or from a finish (`via`). */
export function claimedEvent(lease: Lease, via?: 'finish'): WorkerEventBody {
  return {
    event: 'claimed',
    job: lease.id,
    token: lease.token,
    attempt: lease.attempt,
    qty: lease.qty,
    leaseUntil: lease.leaseUntil,
    ...(via ? { via } : {}),
  };
}

/**
 * A `not_leased` refusal whose `current` shows the job `dead` may be a cancel — or a job
 * quarantined once its lease ended. Only the job's `deadReason` tells, so the worker asks.
 */
export function mayBeCancelled(refusal: Refusal): boolean {
  return refusal.reason === 'not_leased' && refusal.current?.status === 'dead';
}

/** The refusal as a loss: `cancelled` when the job, read after it, says it was cancelled. */
export function withDeadReason(refusal: Refusal, job: Pick<Job, 'status' | 'deadReason'> | undefined): Refusal {
  return mayBeCancelled(refusal) && job?.status === 'dead' && job.deadReason === 'cancelled'
    ? { ...refusal, reason: 'cancelled' }
    : refusal;
}

/**
 * How many leases one claim asks for: the free slots (`concurrency` + `prefetch`, leases held
 * whether running or waiting for a turn), within what is left of `maxJobs`.
 */
export function claimSize(slots: { concurrency: number; prefetch?: number; running: number; budget: number }): number {
  const held = slots.concurrency + (slots.prefetch ?? 0);
  return Math.max(0, Math.min(held - slots.running, slots.budget));
}

/** With `prefetch: 'auto'`: how long a lease held ahead may expect to wait for its turn. */
export const AUTO_PREFETCH_HOLD_MS = 20;
/** With `prefetch: 'auto'`: the handler turns the handlers' time is measured over, the most recent kept. */
export const AUTO_PREFETCH_SAMPLES = 64;
/**
 * With `prefetch: 'auto'`: a lease held ahead that has waited this long for a turn is handed back
 * (released, its attempt given back). The handlers' time it was claimed at no longer holds (a job
 * far longer than the ones before it), and another worker may be free to run it now. A worker
 * whose handlers have not started for this long holds none ahead.
 */
export const AUTO_PREFETCH_GIVE_BACK_MS = 1_000;

/** One handler's turn on the worker's clock: when it started, and when it returned (unset while it runs). */
export interface HandlerSpan {
  start: number;
  end?: number | undefined;
}

/**
 * `prefetch: 'auto'`: the leases to hold beyond `concurrency`, as many as the handlers would start
 * in AUTO_PREFETCH_HOLD_MS if each turn were taken as soon as it is given back: `concurrency` ×
 * 20 ms ÷ the handlers' mean time, measured over `spans`, the most recent turns (oldest first),
 * each still running counted up to `now`, within `max`. So a lease held ahead expects to wait
 * about 20 ms for its turn. Short jobs: many held, and finishes share commits. Long jobs, or one
 * that runs on: none. The handlers' time, not the pace they started at: without leases held
 * ahead, a handler starts only once the last one's finish brought its job, so the pace counts
 * the finishes' round trips too, and would hold none ahead exactly where they pay. It holds at
 * least `concurrency` or none: it starts from a target of `concurrency` and, once `holding`
 * (leases are held ahead), keeps `concurrency` down to a target of half of it. Until
 * `2 × concurrency` turns are known (at least 4), once no handler has started for
 * AUTO_PREFETCH_GIVE_BACK_MS, or while the clock stands still (a test's manual clock), it holds
 * none.
 */
export function autoPrefetch(input: {
  concurrency: number;
  spans: readonly HandlerSpan[];
  now: number;
  max: number;
  /** Whether the worker holds leases ahead now: more than `concurrency`. */
  holding?: boolean;
}): number {
  const { concurrency, spans, now, max, holding = false } = input;
  if (spans.length < Math.max(4, 2 * concurrency)) return 0;
  if (now - spans[spans.length - 1]!.start >= AUTO_PREFETCH_GIVE_BACK_MS) return 0;
  if (!(now > spans[0]!.start)) return 0; // a clock standing still measures no time
  let busy = 0;
  for (const { start, end } of spans) busy += Math.max(0, (end ?? now) - start);
  // A clock of whole milliseconds reads a handler far shorter than one as 0, and one as 1 as
  // often as its tick falls inside it, so the sum stays true on the whole; every handler read as
  // 0 while the clock moved means handlers far shorter than a millisecond: as many as allowed.
  const target = busy > 0 ? Math.floor((concurrency * spans.length * AUTO_PREFETCH_HOLD_MS) / busy) : Infinity;
  // Fewer than `concurrency` held ahead would split the handlers' waves: the few waiting leases
  // start at once when a wave's handlers return, the rest when their finishes bring their next
  // jobs, and their sends and finishes then go in two smaller batches instead of one. So a target
  // under `concurrency` is none; but once leases are held ahead, one from half of `concurrency`
  // up is raised to it (a lease then waits up to about 40 ms), so that a handlers' time that
  // wavers about 20 ms does not turn them on and off.
  if (holding ? 2 * target < concurrency : target < concurrency) return 0;
  return Math.min(max, Math.max(concurrency, target));
}

/**
 * `prefetch: 'auto'` follows its target with slack, so a target that wavers does not turn into
 * claims of one or two leases and slots ended only to be claimed again: the worker claims more
 * once it holds fewer than `concurrency`, or falls short of `concurrency` + `target` by half the
 * target; and a slot whose job is done ends, claiming no next job, only while more than
 * `concurrency` + 2 × `target` leases are held (`held` counts that slot).
 */
export function autoPrefetchSlack(input: { concurrency: number; target: number; held: number }): {
  claimMore: boolean;
  endSlot: boolean;
} {
  const { concurrency, target, held } = input;
  const short = concurrency + target - held;
  return {
    claimMore: held < concurrency || (short > 0 && short >= Math.ceil(target / 2)),
    endSlot: held > concurrency + 2 * target,
  };
}

/**
 * Whether a kept-alive connection, idle since `idleSince` (epoch ms), may carry the next
 * request. Judged when the request is made, not by a timer: after a pause (SIGSTOP, a long GC)
 * the worker's own timers may fire before the connection's idle timer, on a connection the
 * server closed meanwhile. A clock that went backwards proves nothing, so it counts as stale.
 */
export function connectionIsFresh(idleSince: number, now: number, freshMs: number): boolean {
  const idle = now - idleSince;
  return idle >= 0 && idle < freshMs;
}

/**
 * A job id as one folder name: percent-encoded (so `/`, `\` and `%` cannot split or alias it),
 * `.` and `..` escaped (they name folders already), and one that would be too long for a file
 * system (over 200 characters encoded) replaced by `@` and its SHA-256 — `@` is always encoded,
 * so that name cannot be another id's.
 */
export function jobFolderName(jobId: string): string {
  const encoded = encodeURIComponent(jobId);
  if (encoded === '.' || encoded === '..') return encoded.replaceAll('.', '%2E');
  if (encoded.length > 200) return `@${createHash('sha256').update(jobId, 'utf8').digest('hex')}`;
  return encoded;
}

/** A generation's folder under the output root: `<job folder>/<token>`, with `/` between. */
export function generationPath(jobId: string, token: number): string {
  return `${jobFolderName(jobId)}/${token}`;
}

/**
 * Which of a job's generations (the tokens found on disk) can no longer win, judged from the
 * job's row as the queue reports it now: those below its current token that are not the one
 * its finish recorded. A claim racing with the cleanup only raises the token, so what is below
 * the token read stays below it; the current holder's generation and any newer one are kept.
 */
export function orphanGenerations(
  job: Pick<Job, 'id' | 'token' | 'status' | 'result'>,
  tokens: readonly number[],
): number[] {
  const winner = job.status === 'done' ? recordedOutput(job.result) : undefined;
  return tokens.filter((token) => token < job.token && generationPath(job.id, token) !== winner);
}

/** The generation a finish recorded in the job's result (`{output: '<job>/<token>'}`), if any. */
export function recordedOutput(result: unknown): string | undefined {
  const output = (result as { output?: unknown } | null | undefined)?.output;
  return typeof output === 'string' ? output : undefined;
}

/**
 * The result a finish records when the handler used its output folder: the handler's result
 * with `output` set to the generation's path. A result that is not a plain object is kept
 * under `value`. `output` is the worker's to set.
 */
export function resultWithOutput(result: unknown, output: string): Record<string, unknown> {
  if (result === undefined) return { output };
  if (result !== null && typeof result === 'object' && !Array.isArray(result)) {
    return { ...(result as Record<string, unknown>), output };
  }
  return { value: result, output };
}

function currentOf(value: unknown): CurrentLease | undefined {
  if (!value || typeof value !== 'object') return undefined;
  const c = value as Partial<CurrentLease>;
  if (typeof c.status !== 'string' || typeof c.token !== 'number') return undefined;
  return { status: c.status, owner: c.owner ?? null, token: c.token, leaseUntil: c.leaseUntil ?? null };
}

/** What a handler's failure is recorded as: its message, or the value itself. */
export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message || err.name;
  return typeof err === 'string' ? err : (JSON.stringify(err) ?? String(err));
}
