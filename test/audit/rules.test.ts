// The audit's rules on hand-made sides: each rule's violation names the job and both sides' values.
import { describe, expect, test } from 'vitest';
import { auditRules, formatAudit, type AuditedEffect, type AuditedJob } from '../../audit/index.js';

const job = (id: string, overrides: Partial<AuditedJob> = {}): AuditedJob => ({
  id,
  qty: 3,
  status: 'done',
  token: 2,
  ...overrides,
});
const effect = (jobId: string, overrides: Partial<AuditedEffect> = {}): AuditedEffect => ({
  jobId,
  qty: 3,
  token: 2,
  ...overrides,
});
const totalsOf = (effects: AuditedEffect[]) => ({
  effects: effects.length,
  qty: effects.reduce((s, e) => s + (e.qty ?? 0), 0),
});

function run(jobs: AuditedJob[], effects: AuditedEffect[], totals = totalsOf(effects)) {
  return auditRules({ jobs, effects, totals });
}

describe('audit rules', () => {
  test('clean: every done job once with its qty; effects of jobs not done yet are noted, not violations', () => {
    const effects = [effect('a'), effect('b', { qty: 5, token: 1 }), effect('c', { token: 1 })];
    const report = run(
      [job('a'), job('b', { qty: 5 }), job('c', { status: 'leased' }), job('d', { status: 'pending', token: 0 })],
      effects,
    );
    expect(report.violations).toEqual([]);
    expect(report.ok).toBe(true);
    expect(report.counts).toEqual({
      jobs: 4,
      done: 2,
      effects: 3,
      effectsOfUnfinishedJobs: 1,
      totals: { effects: 3, qty: 11 },
      downstreams: [{ name: 'receiver', effects: 3, expected: [null], byKey: { '': 3 } }],
    });
    expect(formatAudit(report).at(-1)).toBe('ok: every done job took effect exactly once, with its qty');
  });

  test('a done job without an effect, with two, and with another qty', () => {
    const effects = [effect('b'), effect('b', { token: 3 }), effect('c', { qty: 4 })];
    const report = run([job('a'), job('b', { token: 3 }), job('c')], effects);
    expect(report.violations).toEqual([
      expect.objectContaining({
        rule: 'missing_effect',
        jobId: 'a',
        queue: { status: 'done', qty: 3, token: 2 },
        receiver: { effects: 0 },
      }),
      expect.objectContaining({
        rule: 'extra_effects',
        jobId: 'b',
        receiver: { effects: 2, qty: [3, 3], token: [2, 3] },
      }),
      expect.objectContaining({
        rule: 'qty_differs',
        jobId: 'c',
        queue: expect.objectContaining({ qty: 3 }),
        receiver: { qty: 4, token: 2 },
      }),
    ]);
    expect(report.ok).toBe(false);
  });

  test('an effect of a job the queue does not know, and one with a token no claim issued', () => {
    const report = run([job('a', { token: 2 })], [effect('a', { token: 5 }), effect('ghost', { qty: 1, token: 1 })]);
    expect(report.violations).toEqual([
      expect.objectContaining({
        rule: 'token_ahead',
        jobId: 'a',
        queue: { status: 'done', token: 2 },
        receiver: { qty: 3, token: 5 },
      }),
      expect.objectContaining({
        rule: 'unknown_job',
        jobId: 'ghost',
        queue: { job: null },
        receiver: { qty: 1, token: 1 },
      }),
    ]);
  });

  test('an effect without qty is shown with none: no qty in its side, "no qty" in its message, nothing in the sum', () => {
    const effects = [
      effect('a', { qty: undefined }),
      effect('b', { key: 'mail', qty: undefined }),
      effect('b', { key: 'mail', qty: undefined, token: 1 }),
      effect('c', { key: 'mail', qty: 2 }),
      effect('c', { key: 'mail', qty: undefined }),
    ];
    const report = auditRules({
      jobs: [job('a'), job('b'), job('c')],
      effects,
      totals: { effects: 5, qty: 2 },
      keys: [],
    });
    expect(report.violations).toEqual([
      expect.objectContaining({ rule: 'extra_effects', jobId: 'b', receiver: { effects: 2, token: [2, 1] } }),
      expect.objectContaining({
        rule: 'extra_effects',
        jobId: 'c',
        receiver: { effects: 2, qty: [2, null], token: [2, 2] },
      }),
    ]);
    const missingQty = run([job('a')], [effect('a', { qty: undefined })]);
    expect(missingQty.violations).toEqual([
      {
        rule: 'qty_differs',
        downstream: 'receiver',
        jobId: 'a',
        queue: { status: 'done', qty: 3, token: 2 },
        receiver: { token: 2 },
        message: 'job "a" has qty 3 in the queue, but its effect at the receiver has no qty',
      },
    ]);
    expect(Object.keys(missingQty.violations[0]!.receiver!)).toEqual(['token']);
  });

  test("the receiver's totals must agree with its effects", () => {
    const report = run([job('a')], [effect('a')], { effects: 2, qty: 7 });
    expect(report.violations).toEqual([
      expect.objectContaining({
        rule: 'totals_differ',
        receiver: { totals: { effects: 2, qty: 7 }, listed: { effects: 1, qty: 3 } },
      }),
    ]);
    const lines = formatAudit(report);
    expect(lines.filter((line) => line.startsWith('  checked: '))).toHaveLength(5);
    expect(lines).toContainEqual(expect.stringMatching(/^ {2}VIOLATION totals_differ: .*receiver \{"totals"/));
    expect(lines.at(-1)).toBe('FAIL: 1 violation');
  });
});

describe('audit rules at several downstreams, per key', () => {
  const mail = (jobId: string, overrides: Partial<AuditedEffect> = {}) =>
    effect(jobId, { key: 'email', qty: undefined, ...overrides });
  const runWith = (jobs: AuditedJob[], receiver: AuditedEffect[], mailer: AuditedEffect[], keys = ['email']) =>
    auditRules({
      jobs,
      effects: receiver,
      totals: totalsOf(receiver),
      downstreams: [{ name: 'mailer', effects: mailer, keys }],
    });

  test('clean: each done job has its default effect at the receiver and its email at the mailer', () => {
    const report = runWith([job('a'), job('b')], [effect('a'), effect('b')], [mail('a'), mail('b')]);
    expect(report.violations).toEqual([]);
    expect(report.counts.downstreams).toEqual([
      { name: 'receiver', effects: 2, expected: [null], byKey: { '': 2 } },
      { name: 'mailer', effects: 2, expected: ['email'], byKey: { email: 2 } },
    ]);
    const lines = formatAudit(report);
    expect(lines).toContain('  and against 2 effects at "mailer"');
    expect(lines).toContain('  "mailer": effects by key: "email" 2 (expected of each done job: "email")');
    expect(lines.at(-1)).toBe('ok: every done job took effect exactly once at each of the 2 downstreams, per key');
  });

  test('missing, doubled and token-ahead effects are named by downstream and key; qty is not the keyed effect’s rule', () => {
    const report = runWith(
      [job('a'), job('b'), job('c', { status: 'leased', token: 2 })],
      [effect('a'), effect('b')],
      [
        mail('b', { qty: 7 }),
        mail('b', { token: 1, qty: 7 }),
        mail('c', { token: 4 }),
        mail('c', { key: 'sms', token: 1 }),
      ],
    );
    expect(report.violations).toEqual([
      {
        rule: 'missing_effect',
        downstream: 'mailer',
        jobId: 'a',
        key: 'email',
        queue: { status: 'done', qty: 3, token: 2 },
        receiver: { effects: 0 },
        message: 'job "a" is done (qty 3, token 2) but downstream "mailer" has no effect "email" for it',
      },
      expect.objectContaining({
        rule: 'extra_effects',
        downstream: 'mailer',
        jobId: 'b',
        key: 'email',
        receiver: { effects: 2, qty: [7, 7], token: [2, 1] },
      }),
      expect.objectContaining({
        rule: 'token_ahead',
        downstream: 'mailer',
        jobId: 'c',
        key: 'email',
        queue: { status: 'leased', token: 2 },
        receiver: { token: 4 },
      }),
    ]);
    const lines = formatAudit(report);
    expect(lines).toContainEqual(
      expect.stringMatching(
        /^ {2}VIOLATION missing_effect: .*"mailer" has no effect "email" .* mailer \{"effects":0\}$/,
      ),
    );
    expect(lines).toContain('  "mailer": effects by key: "email" 3, "sms" 1 (expected of each done job: "email")');
  });

  test('a key effect twice for a job that is not done, or with a key nobody expects, is doubled all the same', () => {
    const report = runWith(
      [job('a'), job('p', { status: 'pending', token: 1 })],
      [effect('a')],
      [
        mail('a'),
        mail('a', { key: 'sms' }),
        mail('a', { key: 'sms' }),
        mail('p', { token: 1 }),
        mail('p', { token: 1 }),
      ],
    );
    expect(report.violations.map((v) => [v.rule, v.downstream, v.jobId, v.key])).toEqual([
      ['extra_effects', 'mailer', 'a', 'sms'],
      ['extra_effects', 'mailer', 'p', 'email'],
    ]);
  });

  test('an effect applied under an earlier lease than the finishing one is a note, not a violation', () => {
    const report = runWith([job('a', { token: 3 })], [effect('a', { token: 3 })], [mail('a', { token: 2 })]);
    expect(report.ok).toBe(true);
    expect(report.earlierTokens).toEqual([
      { downstream: 'mailer', jobId: 'a', key: 'email', token: 2, finishedWith: 3 },
    ]);
    expect(formatAudit(report)).toContain(
      '  note: job "a"\'s effect "email" at "mailer" was applied with token 2, the job finished with token 3: an earlier holder sent it, the finisher\'s send was a duplicate',
    );
  });

  test('without expected keys, a downstream is checked only for doubles, unknown jobs and tokens', () => {
    const report = runWith([job('a')], [effect('a')], [mail('ghost', { token: 1 })], []);
    expect(report.violations.map((v) => [v.rule, v.downstream, v.jobId])).toEqual([['unknown_job', 'mailer', 'ghost']]);
    expect(report.violations[0]!.message).toBe(
      'downstream "mailer" has an effect "email" for job "ghost" (no qty, token 1), which the queue does not know',
    );
  });

  test("the receiver's keyed effects sit beside its default effect; its expected keys can be named", () => {
    const effects = [effect('a'), effect('a', { key: 'charge', qty: 9 })];
    expect(auditRules({ jobs: [job('a')], effects, totals: totalsOf(effects) }).violations).toEqual([]);
    const keyed = auditRules({
      jobs: [job('a'), job('b')],
      effects,
      totals: totalsOf(effects),
      keys: [null, 'charge'],
    });
    expect(keyed.violations.map((v) => [v.rule, v.downstream, v.jobId, v.key])).toEqual([
      ['missing_effect', 'receiver', 'b', undefined],
      ['missing_effect', 'receiver', 'b', 'charge'],
    ]);
  });
});

describe('audit output', () => {
  test('a job id with a newline, ESC or another control character cannot forge a line: it is printed escaped', () => {
    const forged = 'x"\n\u001b[2K\rok: every done job took effect exactly once, with its qty\u0085\u009b\u202e\u2028';
    const report = run([job(forged)], []);
    const lines = formatAudit(report).join('\n').split('\n');
    expect(lines).toHaveLength(formatAudit(report).length);
    expect(lines.at(-1)).toBe('FAIL: 1 violation');
    expect(lines.filter((line) => line.startsWith('ok:'))).toEqual([]);
    for (const line of lines) expect(line, JSON.stringify(line)).not.toMatch(/[\p{Cc}\p{Cf}\u2028\u2029]/u);
    expect(report.violations[0]!.message).toBe(
      'job "x\\"\\n\\u001b[2K\\rok: every done job took effect exactly once, with its qty\\u0085\\u009b\\u202e\\u2028" is done (qty 3, token 2) but the receiver has no effect for it',
    );
    // The id itself is kept as it is, where it is data.
    expect(report.violations[0]!.jobId).toBe(forged);
  });
});
