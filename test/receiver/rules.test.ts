// The pure effect rules: every outcome and the order in which they are decided.
import { describe, expect, test } from 'vitest';
import { canonicalBody, canonicalJson } from '../../platform/effect-fields.js';
import { differences, effectOf, judge, sameBody, type JobState } from '../../receiver/index.js';

const NOW = 5_000;

function stateOf(overrides: { qty?: number; token?: number; highestToken?: number } = {}): JobState {
  const token = overrides.token ?? 3;
  return {
    effect: { jobId: 'job-1', qty: overrides.qty ?? 7, token, appliedAt: 1_000 },
    highestToken: overrides.highestToken ?? token,
  };
}

describe('judge', () => {
  test('first request for a job is applied, at now, with its token as the highest', () => {
    expect(judge(undefined, { jobId: 'job-1', qty: 7, token: 3 }, NOW)).toEqual({
      outcome: 'applied',
      changed: true,
      state: { effect: { jobId: 'job-1', qty: 7, token: 3, appliedAt: NOW }, highestToken: 3 },
    });
  });

  test('same qty and equal token is a duplicate that changes nothing', () => {
    const state = stateOf({ token: 3, highestToken: 5 });
    expect(judge(state, { jobId: 'job-1', qty: 7, token: 5 }, NOW)).toEqual({
      outcome: 'duplicate',
      changed: false,
      state,
    });
  });

  test('same qty and higher token is a duplicate that raises the highest token, not the effect token', () => {
    const state = stateOf({ token: 3 });
    expect(judge(state, { jobId: 'job-1', qty: 7, token: 9 }, NOW)).toEqual({
      outcome: 'duplicate',
      changed: true,
      state: { effect: state.effect, highestToken: 9 },
    });
  });

  test('a token lower than the highest is fenced, even with the applied qty', () => {
    const state = stateOf({ token: 3, highestToken: 5 });
    expect(judge(state, { jobId: 'job-1', qty: 7, token: 4 }, NOW)).toEqual({
      outcome: 'fenced',
      changed: false,
      state,
    });
  });

  test('fenced is decided before qty: lower token with a different qty is fenced, not conflict', () => {
    const state = stateOf({ token: 5 });
    expect(judge(state, { jobId: 'job-1', qty: 8, token: 4 }, NOW).outcome).toBe('fenced');
  });

  test('different qty with an equal or higher token is a conflict that changes nothing', () => {
    const state = stateOf({ token: 5 });
    expect(judge(state, { jobId: 'job-1', qty: 8, token: 5 }, NOW)).toEqual({
      outcome: 'conflict',
      changed: false,
      state,
    });
    expect(judge(state, { jobId: 'job-1', qty: 8, token: 6 }, NOW)).toEqual({
      outcome: 'conflict',
      changed: false,
      state,
    });
  });
});

describe('judge: keys and bodies', () => {
  const keyed = (overrides: { key?: string; qty?: number; body?: unknown; token?: number } = {}) => ({
    jobId: 'job-1',
    key: 'charge',
    token: 3,
    ...overrides,
  });

  test('the first request for a new key of a known job is applied, raising the job highest token', () => {
    const state = { highestToken: 4 };
    expect(judge(state, keyed({ body: { amount: 5 }, token: 4 }), NOW)).toEqual({
      outcome: 'applied',
      changed: true,
      state: {
        effect: { jobId: 'job-1', key: 'charge', body: { amount: 5 }, token: 4, appliedAt: NOW },
        highestToken: 4,
      },
    });
    expect(judge(state, keyed({ qty: 2, token: 9 }), NOW).state.highestToken).toBe(9);
  });

  test('the fence is per job: a token below the job highest is fenced on a key the job never sent', () => {
    const state = { highestToken: 5 };
    expect(judge(state, keyed({ qty: 1, token: 4 }), NOW)).toEqual({ outcome: 'fenced', changed: false, state });
  });

  test('bodies compare as JSON with object key order ignored; qty and body are both compared', () => {
    const effect = {
      jobId: 'job-1',
      key: 'charge',
      qty: 2,
      body: { a: 1, b: [1, { c: 2, d: 3 }] },
      token: 3,
      appliedAt: 1,
    };
    const state = { effect, highestToken: 3 };
    const same = { qty: 2, body: { b: [1, { d: 3, c: 2 }], a: 1 } };
    expect(judge(state, keyed(same), NOW).outcome).toBe('duplicate');
    expect(judge(state, keyed({ ...same, body: { a: 1, b: [{ c: 2, d: 3 }, 1] } }), NOW).outcome).toBe('conflict');
    expect(judge(state, keyed({ ...same, qty: 3 }), NOW).outcome).toBe('conflict');
    expect(judge(state, keyed({ qty: 2 }), NOW).outcome, 'body left out').toBe('conflict');
    expect(judge(state, keyed({ body: same.body }), NOW).outcome, 'qty left out').toBe('conflict');
    expect(differences(effect, keyed({ qty: 3, body: 'other' }))).toEqual(['qty', 'body']);
  });

  test('a null body is a body: it equals only null', () => {
    expect(sameBody(null, null)).toBe(true);
    expect(sameBody(null, undefined)).toBe(false);
    expect(sameBody(undefined, undefined)).toBe(true);
    expect(sameBody(0, '0')).toBe(false);
    expect(sameBody({ x: 1 }, { x: 1.0 })).toBe(true);
  });

  test('fenced is decided before the body: a lower token with another body is fenced, not conflict', () => {
    const effect = { jobId: 'job-1', key: 'charge', body: 'x', token: 5, appliedAt: 1 };
    expect(judge({ effect, highestToken: 5 }, keyed({ body: 'y', token: 4 }), NOW).outcome).toBe('fenced');
  });

  test('the effect records only the fields given', () => {
    expect(effectOf({ jobId: 'j', token: 1, body: false }, NOW)).toEqual({
      jobId: 'j',
      body: false,
      token: 1,
      appliedAt: NOW,
    });
    expect(Object.keys(effectOf({ jobId: 'j', token: 1, qty: 2 }, NOW))).toEqual([
      'jobId',
      'qty',
      'token',
      'appliedAt',
    ]);
  });
});

describe('canonicalBody', () => {
  test('rebuilds objects with their keys sorted, at every depth, arrays kept in order', () => {
    expect(JSON.stringify(canonicalBody({ b: 1, a: { d: [{ z: 1, y: 2 }], c: null } }))).toBe(
      '{"a":{"c":null,"d":[{"y":2,"z":1}]},"b":1}',
    );
    expect(canonicalJson({ y: 1, x: 2 })).toBe(canonicalJson({ x: 2, y: 1 }));
  });

  test('keeps a "__proto__" key as data', () => {
    const body = JSON.parse('{"__proto__":{"polluted":true},"a":1}') as unknown;
    expect(JSON.stringify(canonicalBody(body))).toBe('{"__proto__":{"polluted":true},"a":1}');
    expect(({} as { polluted?: boolean }).polluted).toBeUndefined();
  });
});
