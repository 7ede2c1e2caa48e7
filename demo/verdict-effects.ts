// The verdict's rows about effects, per downstream and key: each job's default effect once at
// the receiver with its qty, its e-mail once at the mailer with its body, one mail in the
// mailer's outbox per job, nothing else; and a stale token seen by no downstream at all.
import { sameBody } from '../receiver/index.js';
import type { DemoJob } from './jobs.js';
import type { Check, FinalState, Freeze, JournalRow, ReceiverEffect } from './verdict.js';
import { EMAIL_KEY, emailOf } from './worker-main.js';

export function effectChecks(jobs: readonly DemoJob[], final: FinalState): Check[] {
  const checks = [
    oncePer('receiver', undefined, jobs, final.effects, (job, e) =>
      e.qty === job.qty ? undefined : `qty ${e.qty}, not ${job.qty}`,
    ),
  ];
  const { mailer } = final;
  if (!mailer) return checks;
  checks.push(
    oncePer('mailer', EMAIL_KEY, jobs, mailer.effects, (job, e) =>
      sameBody(e.body, emailOf(job)) ? undefined : `body ${JSON.stringify(e.body)}`,
    ),
  );
  const perJob = new Map<string, number>();
  for (const mail of mailer.mails) perJob.set(mail.jobId, (perJob.get(mail.jobId) ?? 0) + 1);
  const once = jobs.filter((j) => perJob.get(j.id) === 1).length;
  checks.push({
    label: "mails in the mailer's outbox (GET /outbox)",
    expected: `${jobs.length}, one per job`,
    actual: `${mailer.mails.length}, ${once} jobs with one`,
    ok: mailer.mails.length === jobs.length && once === jobs.length,
  });
  return checks;
}

/**
 * Exactly once per (downstream, jobId, key): every job has one effect under `key` at the
 * downstream, as `differs` expects it, and the downstream has no effect besides.
 */
function oncePer(
  downstream: string,
  key: string | undefined,
  jobs: readonly DemoJob[],
  effects: readonly ReceiverEffect[],
  differs: (job: DemoJob, effect: ReceiverEffect) => string | undefined,
): Check {
  const problems: string[] = [];
  const known = new Set(jobs.map((j) => j.id));
  for (const job of jobs) {
    const mine = effects.filter((e) => e.jobId === job.id && (e.key ?? undefined) === key);
    const wrong = mine.length === 1 ? differs(job, mine[0]!) : undefined;
    if (mine.length !== 1) problems.push(`${job.id}: ${mine.length} effects`);
    else if (wrong) problems.push(`${job.id}: ${wrong}`);
  }
  for (const e of effects) {
    if (!known.has(e.jobId)) problems.push(`unknown job ${e.jobId}`);
    else if ((e.key ?? undefined) !== key) problems.push(`${e.jobId}: an effect with key ${e.key ?? 'none'}`);
  }
  const what = key === undefined ? 'default effect, with its qty' : `"${key}" effect, with its body`;
  return {
    label: `each job's ${what}, once at ${downstream}`,
    expected: `${jobs.length} of ${jobs.length}`,
    actual: problems.length === 0 ? `${jobs.length} of ${jobs.length}` : problems.join('; '),
    ok: problems.length === 0,
  };
}

/** The stale holder's token never reached the downstream: the gateway forwarded nothing under it. */
export function notSeenBy(downstream: string, journal: readonly JournalRow[], freeze: Freeze): Check {
  const forwarded = journal.filter((j) => j.jobId === freeze.job && j.token === freeze.token).length;
  return {
    label: `${downstream} never saw token ${freeze.token} for ${freeze.job}`,
    expected: '0 requests',
    actual: `${forwarded} requests`,
    ok: forwarded === 0,
  };
}
