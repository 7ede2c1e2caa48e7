// `conform`: a black-box check that a live downstream keeps the fencing protocol, run case by
// case on job ids no earlier run used, so it can be pointed at a service already in use. Each
// case is reported as it ends; the report says which passed and why the others failed. A request
// left unanswered within the timeout ends the run after its case: the rest are not run.
import { randomBytes } from 'node:crypto';
import { httpUrl } from '../platform/url.js';
import { describeValue } from '../platform/describe-value.js';
import { checkRequiredOptions, type OptionNames } from '../platform/option-names.js';
import { BATCH_CASE } from './batch-case.js';
import { CASES, CaseFailure, CaseSkipped } from './cases.js';
import { createPeer } from './peer.js';

export interface ConformOptions {
  /** The downstream's effect endpoint, path included (a leasehold receiver's is `<base>/effects`). */
  url: string;
  /** The downstream's secret: requests are signed, and the signature cases run. */
  secret?: string | undefined;
  /** Identical requests sent at once in the race case (default 16, at most 64). */
  races?: number;
  /** How long each request may take (default 10000). */
  timeoutMs?: number;
  /** Called as each case ends, in order. */
  onCase?: (result: CaseResult) => void;
}

export interface CaseResult {
  name: string;
  /**
   * `skipped`: a signature case without a secret, the batch case for a downstream that offers no
   * batches, or a case not run because an earlier one timed out (its detail starts "not run: ").
   */
  status: 'passed' | 'failed' | 'skipped';
  /** Why it failed (the request, what the protocol asks, what the downstream answered), or why it was skipped. */
  detail?: string;
}

export interface ConformReport {
  url: string;
  cases: CaseResult[];
  passed: number;
  failed: number;
  /** Cases not run because a request went unanswered within `timeoutMs`: 0 when every case ran. */
  notRun: number;
}

export const CONFORM_DEFAULTS = { races: 16, timeoutMs: 10_000 } as const;

const CONFORM_OPTION_NAMES: OptionNames<ConformOptions> = {
  url: true,
  secret: true,
  races: true,
  timeoutMs: true,
  onCase: true,
};

/** Runs every case against `url`; resolves whatever the downstream does (a failure is a result). */
export async function conform(options: ConformOptions): Promise<ConformReport> {
  checkRequiredOptions('conform', options, CONFORM_OPTION_NAMES);
  const url = httpUrl('url', options.url);
  if (options.secret === '') throw new RangeError('secret must not be empty; leave it out for an unsigned downstream.');
  const races = options.races ?? CONFORM_DEFAULTS.races;
  if (!Number.isSafeInteger(races) || races < 2 || races > 64) {
    throw new RangeError(`races must be an integer from 2 to 64, not ${String(races)}.`);
  }
  const timeoutMs = options.timeoutMs ?? CONFORM_DEFAULTS.timeoutMs;
  if (!Number.isSafeInteger(timeoutMs) || timeoutMs < 1) {
    throw new RangeError(
      `timeoutMs must be a positive integer number of milliseconds, not ${describeValue(timeoutMs)}.`,
    );
  }
  if (options.secret !== undefined && typeof options.secret !== 'string') {
    throw new TypeError(`secret must be a string, not ${describeValue(options.secret)}.`);
  }
  if (options.onCase !== undefined && typeof options.onCase !== 'function') {
    throw new TypeError(`onCase must be a function (result) => void, not ${describeValue(options.onCase)}.`);
  }
  const peer = createPeer(url, options.secret, timeoutMs);
  const run = `conform-${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;
  const ctx = { peer, job: (name: string) => `${run}-${name}`, races, signed: options.secret !== undefined };
  const cases: CaseResult[] = [];
  let notRun = 0;
  try {
    for (const c of [...CASES, BATCH_CASE]) {
      let result: CaseResult;
      if (c.signed && options.secret === undefined) {
        result = { name: c.name, status: 'skipped', detail: 'no secret given' };
      } else if (peer.timedOut) {
        // A downstream that left a request unanswered is likely hung: every further case would
        // wait out a timeout of its own, to report the same thing.
        result = {
          name: c.name,
          status: 'skipped',
          detail: `not run: the downstream did not answer a request within ${timeoutMs} ms`,
        };
        notRun += 1;
      } else {
        try {
          await c.run(ctx);
          result = { name: c.name, status: 'passed' };
        } catch (err) {
          result =
            err instanceof CaseSkipped
              ? { name: c.name, status: 'skipped', detail: err.message }
              : {
                  name: c.name,
                  status: 'failed',
                  detail: err instanceof CaseFailure ? err.message : `the request failed: ${(err as Error).message}`,
                };
        }
      }
      cases.push(result);
      options.onCase?.(result);
    }
  } finally {
    peer.close();
  }
  return {
    url: url.href,
    cases,
    passed: cases.filter((c) => c.status === 'passed').length,
    failed: cases.filter((c) => c.status === 'failed').length,
    notRun,
  };
}

/** One line per case: `ok`, `FAIL` with why, or `skip`. */
export function formatCase(result: CaseResult): string {
  switch (result.status) {
    case 'passed':
      return `ok    ${result.name}`;
    case 'failed':
      return `FAIL  ${result.name}: ${result.detail ?? ''}`;
    case 'skipped':
      return `skip  ${result.name} (${result.detail ?? ''})`;
  }
}

/** The last line: `N passed, M failed`, then `, K not run` when a timeout ended the run early. */
export function formatSummary(
  report: Pick<ConformReport, 'passed' | 'failed'> & Partial<Pick<ConformReport, 'notRun'>>,
): string {
  const notRun = report.notRun ? `, ${report.notRun} not run` : '';
  return `${report.passed} passed, ${report.failed} failed${notRun}`;
}
