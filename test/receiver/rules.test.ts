// The pure effect rules: every outcome and the order in which they are decided.
import { describe, expect, test } from 'vitest';
import { judge, type JobState } from '../../receiver/index.js';

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
