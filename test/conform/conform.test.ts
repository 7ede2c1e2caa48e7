// The conformance suite against downstreams written for the tests: one that keeps the protocol
// passes every case; each deliberately broken one fails exactly the cases of the rule it breaks,
// by name, and passes the rest.
import { describe, expect, test } from 'vitest';
import { conform, formatCase, formatSummary, type ConformReport } from '../../conform/index.js';
import { toyDownstream } from '../helpers/toy-downstream.js';

const TOKEN_CASES = [
  'a higher token repeats as a duplicate, answered with the effect as first recorded',
  'a lower token is fenced on the same key',
  'a lower token is fenced on another key of the same job',
  'a lower token is fenced before its effect is compared: fenced, not a conflict',
  'a conflict raises no token',
];
const RACE_CASES = ['racing identical requests give exactly one applied'];
const SIGNATURE_CASES = ['unsigned is 401', 'forged is 401', "another route's signature is 401", 'v1 is 401'];
/** The optional extension's case, skipped for a downstream that offers no batches (the toy offers none). */
const BATCH_CASE = 'a batch, when offered, is judged effect by effect as single requests are';

const named = (report: ConformReport, status: 'passed' | 'failed' | 'skipped') =>
  report.cases.filter((c) => c.status === status).map((c) => c.name);

/** The report with each failure's reason, so a failing assertion shows why. */
const shown = (report: ConformReport) => report.cases.map(formatCase).join('\n');

describe('conform', () => {
  test('a downstream that keeps the protocol passes every case; without a secret the signature cases are skipped', async () => {
    const downstream = await toyDownstream();
    const lines: string[] = [];
    const report = await conform({ url: downstream.url, onCase: (c) => lines.push(formatCase(c)) });
    expect(named(report, 'failed'), shown(report)).toEqual([]);
    expect(named(report, 'skipped')).toEqual([...SIGNATURE_CASES, BATCH_CASE]);
    expect(report.cases.at(-1)).toEqual({
      name: BATCH_CASE,
      status: 'skipped',
      detail: 'the downstream offers no batches (no Leasehold-Batch header)',
    });
    expect(report.passed).toBe(report.cases.length - SIGNATURE_CASES.length - 1);
    expect(lines).toEqual(report.cases.map(formatCase));
    expect(formatSummary(report)).toBe(`${report.passed} passed, 0 failed`);
  });

  test('with its secret, every case passes, the signature cases included', async () => {
    const downstream = await toyDownstream({ secret: 's3cret', path: '/hooks/effects' });
    const report = await conform({ url: downstream.url, secret: 's3cret' });
    expect(named(report, 'failed'), shown(report)).toEqual([]);
    expect(named(report, 'skipped')).toEqual([BATCH_CASE]);
  });

  test('each run uses job ids of its own: a second run against the same downstream passes too', async () => {
    const downstream = await toyDownstream();
    await conform({ url: downstream.url });
    const again = await conform({ url: downstream.url });
    expect(named(again, 'failed'), shown(again)).toEqual([]);
    const jobs = new Set(downstream.applied.map((e) => e.jobId.split('-').slice(0, 3).join('-')));
    expect(jobs.size).toBe(2);
  });

  test.each([
    ['ignores tokens', 'tokens', TOKEN_CASES, undefined],
    ['applies twice under a race', 'race', RACE_CASES, undefined],
    [
      'compares the effect before the fence',
      'conflict-first',
      ['a lower token is fenced before its effect is compared: fenced, not a conflict'],
      undefined,
    ],
    ['raises the token on a conflict', 'conflict-raises', ['a conflict raises no token'], undefined],
    [
      "answers a duplicate with the repeat's token",
      'duplicate-restamped',
      ['a higher token repeats as a duplicate, answered with the effect as first recorded'],
      undefined,
    ],
    ['ignores signatures', 'signatures', SIGNATURE_CASES, 's3cret'],
  ] as const)('a downstream that %s fails exactly those cases', async (_what, breaks, cases, secret) => {
    const downstream = await toyDownstream({ breaks, ...(secret ? { secret } : {}) });
    const report = await conform({ url: downstream.url, ...(secret ? { secret } : {}) });
    expect(named(report, 'failed'), shown(report)).toEqual(cases);
    expect(report.failed).toBe(cases.length);
    for (const failure of report.cases.filter((c) => c.status === 'failed')) {
      expect(failure.detail, failure.name).toMatch(/expected .+, got /);
    }
  });

  test('an unreachable downstream fails every case, saying it could not be reached', async () => {
    const downstream = await toyDownstream();
    await downstream.close();
    const report = await conform({ url: downstream.url, timeoutMs: 2_000 });
    expect(report.passed).toBe(0);
    const failed = report.cases.filter((c) => c.status === 'failed');
    expect(failed.length, shown(report)).toBeGreaterThan(0);
    expect(failed.length, shown(report)).toBe(report.failed);
    for (const failure of failed) expect(failure.detail, failure.name).toMatch(/could not be reached/);
    // The rest are the cases that need a secret, which none was given.
    expect(
      report.cases.filter((c) => c.status !== 'failed').map((c) => [c.status, c.detail]),
      'the cases that did not fail',
    ).toEqual(SIGNATURE_CASES.map(() => ['skipped', 'no secret given']));
  });

  test('bad options are refused before anything is sent', async () => {
    await expect(conform({ url: 'ftp://x/effects' })).rejects.toThrow('url must be an http:// URL');
    await expect(conform({ url: 'http://127.0.0.1:1/e', secret: '' })).rejects.toThrow('secret must not be empty');
    await expect(conform({ url: 'http://127.0.0.1:1/e', races: 1 })).rejects.toThrow(
      'races must be an integer from 2 to 64',
    );
    for (const [timeoutMs, shown] of [
      [0, '0'],
      [-1, '-1'],
      [Number.NaN, 'NaN'],
      [1.5, '1.5'],
      ['100', '"100"'],
    ] as const) {
      await expect(conform({ url: 'http://127.0.0.1:1/e', timeoutMs: timeoutMs as number })).rejects.toThrow(
        new RangeError(`timeoutMs must be a positive integer number of milliseconds, not ${shown}.`),
      );
    }
    await expect(conform({ url: 'http://127.0.0.1:1/e', secret: 5 as never })).rejects.toThrow(
      new TypeError('secret must be a string, not 5.'),
    );
    await expect(conform({ url: 'http://127.0.0.1:1/e', onCase: 'log' as never })).rejects.toThrow(
      new TypeError('onCase must be a function (result) => void, not "log".'),
    );
  });
});
