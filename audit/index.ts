// The end-to-end audit as a function: read every job from the queue and every effect and the
// totals from the receiver, over their HTTP APIs, and judge them with the audit's rules.
// `leasehold audit` (main.ts) prints its report; tests and the demo call it directly.
import { QueueClient } from '../queue/client.js';
import type { JobSummary } from '../queue/types.js';
import { ReceiverClient } from '../receiver/client.js';
import { auditRules, type AuditedEffect, type AuditedJob, type AuditInput, type AuditReport } from './rules.js';

export {
  AUDIT_RULES,
  auditRules,
  formatAudit,
  type AuditCounts,
  type AuditedEffect,
  type AuditedJob,
  type AuditInput,
  type AuditReport,
  type RuleName,
  type Violation,
} from './rules.js';

export interface AuditOptions {
  /** The queue's base URL, or a client of it. */
  queue: string | QueueClient;
  /** The receiver's base URL, or a client of it. */
  receiver: string | ReceiverClient;
  /** The queue's API key, when it was started with one. */
  apiKey?: string | undefined;
  /** Per request (default 10 s). */
  timeoutMs?: number;
  /** Jobs read per request (default 1000, the most the queue lists at once). */
  pageSize?: number;
  signal?: AbortSignal;
}

/** The largest page the queue lists. */
const MAX_PAGE = 1_000;
/** Reads of the receiver's effects and totals before a disagreement between them is believed. */
const TOTALS_READS = 3;

/**
 * Reads both sides and judges them. The queue is read first: a job done by then had its effect
 * sent before it finished, so the receiver, read after, has it. What the later read may show
 * that the first did not (a job enqueued since, a job claimed again since) is read again from
 * the queue before it is called a violation. Best run on a quiet system: after a test, or with
 * the workers stopped.
 */
export async function audit(options: AuditOptions): Promise<AuditReport> {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const queue =
    typeof options.queue === 'string'
      ? new QueueClient(options.queue, { timeoutMs, apiKey: options.apiKey })
      : options.queue;
  const receiver =
    typeof options.receiver === 'string' ? new ReceiverClient(options.receiver, { timeoutMs }) : options.receiver;
  const call = options.signal ? { signal: options.signal } : {};
  try {
    const jobs = await allJobs(queue, options.pageSize ?? MAX_PAGE, call);
    const { effects, totals } = await receiverSide(receiver, call);
    const input: AuditInput = { jobs, effects, totals };
    const first = auditRules(input);
    const newer = first.violations.filter((v) => v.rule === 'unknown_job' || v.rule === 'token_ahead');
    if (newer.length === 0) return first;
    const known = new Map(jobs.map((job) => [job.id, job]));
    for (const jobId of new Set(newer.map((v) => v.jobId!))) {
      const job = await jobNow(queue, jobId, call);
      if (job) known.set(jobId, job);
    }
    return auditRules({ ...input, jobs: [...known.values()] });
  } finally {
    if (typeof options.queue === 'string') queue.close();
    if (typeof options.receiver === 'string') receiver.close();
  }
}

/** Every job, page by page, without payloads and results: what the audit reads is the same whatever jobs carry. */
async function allJobs(queue: QueueClient, limit: number, call: { signal?: AbortSignal }): Promise<AuditedJob[]> {
  const jobs: AuditedJob[] = [];
  let after: string | undefined;
  for (;;) {
    const page = await queue.listSummaries(after === undefined ? { limit } : { limit, after }, call);
    jobs.push(...page.jobs.map(audited));
    if (page.next === null) return jobs;
    after = page.next;
  }
}

/** Effects and totals read so that they belong together: read again while they disagree. */
async function receiverSide(
  receiver: ReceiverClient,
  call: { signal?: AbortSignal },
): Promise<{ effects: AuditedEffect[]; totals: { effects: number; qty: number } }> {
  for (let read = 1; ; read++) {
    const before = await receiver.totals(call);
    // An effect sent without a qty adds nothing to the totals, as 0 adds nothing to the sum.
    const effects = (await receiver.effects(call)).map(({ jobId, qty, token }) => ({ jobId, qty: qty ?? 0, token }));
    const totals = await receiver.totals(call);
    const settled = before.effects === totals.effects && before.qty === totals.qty && totals.effects === effects.length;
    if (settled || read === TOTALS_READS) return { effects, totals };
  }
}

async function jobNow(queue: QueueClient, id: string, call: { signal?: AbortSignal }): Promise<AuditedJob | undefined> {
  try {
    return audited(await queue.get(id, call));
  } catch (err) {
    if ((err as { code?: unknown }).code === 'unknown_job') return undefined;
    throw err;
  }
}

function audited(job: JobSummary): AuditedJob {
  return { id: job.id, qty: job.qty, status: job.status, token: job.token };
}
