// The stalls `leasehold worker --stall-before-*` and the demo's workers make. Whoever freezes the
// worker does so on seeing the `stalled` line, so the line must not be out before every send the
// handler started at once is waiting in the pause: a freeze between two sends would leave the
// second to find the lease lost on waking, and it would never be sent (nor refused).
import { expect, test } from 'vitest';
import { stallHooks } from '../../worker/index.js';
import type { StalledEvent } from '../../worker/events.js';
import type { Lease } from '../../queue/types.js';

const lease: Lease = {
  id: 'job-1',
  qty: 1,
  payload: null,
  owner: 'w1',
  token: 1,
  attempt: 1,
  leaseUntil: 1_000,
  deadline: null,
};
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));
/** What the worker gives its hooks besides the lease: a stop that never comes. */
const noStop = { signal: new AbortController().signal };

function stalls(beforeSend: number[]) {
  const lines: StalledEvent[] = [];
  const made = stallHooks({
    name: 'w1',
    stallMs: 20,
    beforeSend,
    beforeFinish: [],
    announce: (line) => lines.push(line),
  });
  made.observe({
    t: 0,
    worker: 'w1',
    event: 'claimed',
    job: lease.id,
    token: lease.token,
    attempt: 1,
    qty: 1,
    leaseUntil: 1_000,
  });
  return { ...made, lines };
}

test('two sends started at once share one pause, announced once both wait in it', async () => {
  const { hooks, lines } = stalls([1]);
  const first = hooks.beforeSend!(lease, noStop);
  expect(lines, 'no stalled line while the handler is still starting its sends').toEqual([]);
  const second = hooks.beforeSend!(lease, noStop);
  expect(second, 'the second send waits in the same pause').toBe(first);
  expect(lines).toEqual([]);
  await nextTurn();
  expect(lines.map((l) => [l.event, l.job, l.token, l.before, l.ms])).toEqual([['stalled', 'job-1', 1, 'send', 20]]);
  await first;
  expect(lines, 'announced once for both sends').toHaveLength(1);
});

test('a lease not asked for is not stalled', () => {
  const { hooks, lines } = stalls([2]);
  expect(hooks.beforeSend!(lease, noStop)).toBeUndefined();
  expect(lines).toEqual([]);
});
