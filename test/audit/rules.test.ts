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
  qty: effects.reduce((s, e) => s + e.qty, 0),
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

  test("the receiver's totals must agree with its effects", () => {
    const report = run([job('a')], [effect('a')], { effects: 2, qty: 7 });
    expect(report.violations).toEqual([
      expect.objectContaining({
        rule: 'totals_differ',
        receiver: { totals: { effects: 2, qty: 7 }, listed: { effects: 1, qty: 3 } },
      }),
    ]);
    const lines = formatAudit(report);
    expect(lines.filter((line) => line.startsWith('  checked: '))).toHaveLength(4);
    expect(lines).toContainEqual(expect.stringMatching(/^ {2}VIOLATION totals_differ: .*receiver \{"totals"/));
    expect(lines.at(-1)).toBe('FAIL: 1 violation');
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
