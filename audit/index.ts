// The end-to-end audit as a function: read every job from the queue, every effect and the totals
// from the receiver and every effect from each other downstream, over their HTTP APIs, and
// judge them with the audit's rules.
// `leasehold audit` (main.ts) prints its report; tests and the demo call it directly.
import { QueueClient } from '../queue/client.js';
import type { JobSummary } from '../queue/types.js';
import { ReceiverClient } from '../receiver/client.js';
import { httpUrl } from '../platform/url.js';
import { checkRequiredOptions, type OptionNames } from '../platform/option-names.js';
import type { Effect } from '../receiver/index.js';
import {
  auditRules,
  RECEIVER,
  type AuditedDownstream,
  type AuditedEffect,
  type AuditedJob,
  type AuditInput,
  type AuditReport,
} from './rules.js';

export {
  AUDIT_RULES,
  auditRules,
  type AuditCounts,
  type AuditedDownstream,
  type AuditedEffect,
  type AuditedJob,
  type AuditInput,
  type AuditReport,
  type DownstreamCounts,
  type EarlierToken,
  type RuleName,
  type Violation,
} from './rules.js';
export { formatAudit } from './format.js';

/** A downstream besides the receiver, read with `GET <base>/effects` (the receiver's listing). */
export interface AuditDownstream {
  /** Its name at the gateway (`mailer`). */
  name: string;
  /**
   * Its effect endpoint as the gateway has it, ending in `/effects` (`http://mailer:4400/effects`):
   * the audit lists its effects with GET on the same path. Or a client of its base URL.
   */
  url: string | ReceiverClient;
  /** The keys every done job must have sent there (default none: only doubles, unknown jobs and tokens are checked). */
  keys?: readonly string[];
}

export interface AuditOptions {
  /** The queue's base URL, or a client of it. */
  queue: string | QueueClient;
  /** The receiver's base URL, or a client of it. */
  receiver: string | ReceiverClient;
  /**
   * What every done job must have at the receiver, by key; `null` is the default effect.
   * Default `[null]`: the default effect, with the job's qty.
   */
  receiverKeys?: ReadonlyArray<string | null>;
  /** Other downstreams, each audited on its own. */
  downstreams?: readonly AuditDownstream[];
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

const AUDIT_OPTION_NAMES: OptionNames<AuditOptions> = {
  queue: true,
  receiver: true,
  receiverKeys: true,
  downstreams: true,
  apiKey: true,
  timeoutMs: true,
  pageSize: true,
  signal: true,
};

const AUDIT_DOWNSTREAM_NAMES: OptionNames<AuditDownstream> = { name: true, url: true, keys: true };

/**
 * Reads both sides and judges them. The queue is read first: a job done by then had its effect
 * sent before it finished, so the receiver, read after, has it. What the later read may show
 * that the first did not (a job enqueued since, a job claimed again since) is read again from
 * the queue before it is called a violation. Best run on a quiet system: after a test, or with
 * the workers stopped.
 */
export async function audit(options: AuditOptions): Promise<AuditReport> {
  checkRequiredOptions('audit', options, AUDIT_OPTION_NAMES);
  const timeoutMs = options.timeoutMs ?? 10_000;
  const queue =
    typeof options.queue === 'string'
      ? new QueueClient(options.queue, { timeoutMs, apiKey: options.apiKey })
      : options.queue;
  const receiver =
    typeof options.receiver === 'string' ? new ReceiverClient(options.receiver, { timeoutMs }) : options.receiver;
  const call = options.signal ? { signal: options.signal } : {};
  const others = (options.downstreams ?? []).map((d, i) => ({
    ...checkRequiredOptions(`audit's downstreams[${i}]`, d, AUDIT_DOWNSTREAM_NAMES),
    client: typeof d.url === 'string' ? new ReceiverClient(listingBase(d.name, d.url), { timeoutMs }) : d.url,
  }));
  try {
    const jobs = await allJobs(queue, options.pageSize ?? MAX_PAGE, call);
    const [{ effects, totals }, downstreams] = await Promise.all([
      receiverSide(receiver, call),
      Promise.all(
        others.map(async (d): Promise<AuditedDownstream> => ({
          name: d.name,
          keys: d.keys ?? [],
          effects: (await downstreamEffects(d.name, d.client, call)).map(audited),
        })),
      ),
    ]);
    const input: AuditInput = {
      jobs,
      effects,
      totals,
      downstreams,
      ...(options.receiverKeys ? { keys: options.receiverKeys } : {}),
    };
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
    for (const d of others) if (typeof d.url === 'string') d.client.close();
  }
}

/**
 * The base URL a downstream's listing is read under: its effect endpoint without `/effects`. A
 * name the gateway could not have, or an endpoint elsewhere, is refused before anything is read.
 */
export function listingBase(name: string, url: string): string {
  if (!/^[A-Za-z][A-Za-z0-9_-]{0,63}$/.test(name) || name === RECEIVER) {
    throw new RangeError(
      `a downstream's name must be a letter followed by up to 63 letters, digits, "-" or "_", and not "${RECEIVER}" (give that one as the receiver), not ${JSON.stringify(name)}`,
    );
  }
  const parsed = httpUrl(`the downstream ${name}`, url);
  const path = parsed.pathname.replace(/\/+$/, '');
  if (!path.endsWith('/effects') || parsed.search !== '') {
    throw new RangeError(
      `the downstream ${name}'s URL must be its effect endpoint ending in /effects, as the receiver's is, not ${JSON.stringify(url)}: the audit lists its effects with GET on that path (docs/operations.md)`,
    );
  }
  parsed.pathname = path.slice(0, -'/effects'.length) || '/';
  return parsed.toString().replace(/\/$/, '');
}

/** Every job, page by page, without payloads and results: what the audit reads is the same whatever jobs carry. */
async function allJobs(queue: QueueClient, limit: number, call: { signal?: AbortSignal }): Promise<AuditedJob[]> {
  const jobs: AuditedJob[] = [];
  let after: string | undefined;
  for (;;) {
    const page = await queue.listSummaries(after === undefined ? { limit } : { limit, after }, call);
    jobs.push(...page.jobs.map(auditedJob));
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
    const effects = (await receiver.effects(call)).map(audited);
    const totals = await receiver.totals(call);
    const settled = before.effects === totals.effects && before.qty === totals.qty && totals.effects === effects.length;
    if (settled || read === TOTALS_READS) return { effects, totals };
  }
}

/** A downstream's effects; a failure names the downstream, which the receiver's client cannot. */
async function downstreamEffects(
  name: string,
  client: ReceiverClient,
  call: { signal?: AbortSignal },
): Promise<Effect[]> {
  try {
    return await client.effects(call);
  } catch (err) {
    throw new Error(`could not list the effects of the downstream ${name}: ${(err as Error).message}`, { cause: err });
  }
}

async function jobNow(queue: QueueClient, id: string, call: { signal?: AbortSignal }): Promise<AuditedJob | undefined> {
  try {
    return auditedJob(await queue.get(id, call));
  } catch (err) {
    if ((err as { code?: unknown }).code === 'unknown_job') return undefined;
    throw err;
  }
}

function auditedJob(job: JobSummary): AuditedJob {
  return { id: job.id, qty: job.qty, status: job.status, token: job.token };
}

/** An effect sent without a qty has none in the audit either: qty is >= 1 when given, never 0. */
function audited({ jobId, key, qty, token }: Effect): AuditedEffect {
  return { jobId, ...(key == null ? {} : { key }), ...(qty == null ? {} : { qty }), token };
}
