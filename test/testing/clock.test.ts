// The kit's manual clock and hold: time moves only when told, timers fire in due order after
// the jump, and a hold keeps its first caller until released.
import { expect, test } from 'vitest';
import { ManualClock, hold } from '../../testing/index.js';

test('advance moves now at once, then fires the timers that fell due, in due order', () => {
  const clock = new ManualClock(1_000);
  const fired: Array<[string, number]> = [];
  clock.setTimer(() => fired.push(['late', clock.now()]), 300);
  clock.setTimer(() => fired.push(['early', clock.now()]), 100);
  clock.setTimer(() => fired.push(['later', clock.now()]), 500);

  expect(clock.advance(299)).toBe(1_299);
  expect(fired).toEqual([['early', 1_299]]);
  // Exactly at the due time: it fires.
  clock.advance(1);
  expect(fired).toEqual([
    ['early', 1_299],
    ['late', 1_300],
  ]);
  expect(clock.pendingTimers).toBe(1);
  clock.advance(10_000);
  expect(fired.at(-1)).toEqual(['later', 11_300]);
  expect(clock.pendingTimers).toBe(0);
});

test('timers due at one instant fire in the order they were set; a cleared timer never fires', () => {
  const clock = new ManualClock(0);
  const fired: string[] = [];
  clock.setTimer(() => fired.push('a'), 50);
  const b = clock.setTimer(() => fired.push('b'), 50);
  clock.setTimer(() => fired.push('c'), 50);
  clock.clearTimer(b);
  clock.advance(50);
  expect(fired).toEqual(['a', 'c']);
});

test('a timer set by a firing timer fires in the same advance when it falls due within it', () => {
  const clock = new ManualClock(0);
  const fired: number[] = [];
  clock.setTimer(() => {
    fired.push(clock.now());
    clock.setTimer(() => fired.push(clock.now()), 0);
    clock.setTimer(() => fired.push(-1), 10);
  }, 10);
  clock.advance(10);
  expect(fired).toEqual([10, 10]);
  expect(clock.pendingTimers).toBe(1);
});

test('the time stands still without advance, and bad steps are refused', () => {
  const clock = new ManualClock(5);
  expect(clock.now()).toBe(5);
  expect(clock.manual).toBe(true);
  expect(() => clock.advance(-1)).toThrow('advance takes a whole, non-negative number of milliseconds, not -1.');
  expect(() => clock.advance(1.5)).toThrow(/not 1\.5/);
  expect(() => clock.advance('10' as never)).toThrow(
    new TypeError('advance takes a whole, non-negative number of milliseconds, not "10".'),
  );
  expect(() => new ManualClock(-3)).toThrow(/not -3/);
  expect(clock.now()).toBe(5);
});

test("a timer's error reaches the test after the other due timers ran", () => {
  const clock = new ManualClock(0);
  const fired: string[] = [];
  clock.setTimer(() => {
    throw new Error('boom');
  }, 1);
  clock.setTimer(() => fired.push('after'), 2);
  expect(() => clock.advance(5)).toThrow('boom');
  expect(fired).toEqual(['after']);
});

test('a hold keeps its first caller until released and lets later callers pass', async () => {
  const point = hold();
  const order: string[] = [];
  const first = point.wait('ignored').then(() => order.push('first'));
  await point.arrived;
  await point.wait();
  order.push('second');
  expect(order).toEqual(['second']);
  point.release();
  await first;
  point.release();
  expect(order).toEqual(['second', 'first']);
});

test('a hold given a signal (as a worker gives its hooks) lets its caller go, failing with the reason, when it aborts', async () => {
  const stopped = new Error('the worker stops');
  const stop = new AbortController();
  const point = hold();
  const held = point.wait({ id: 'job-1' }, { signal: stop.signal }).then(
    () => 'let go',
    (err: unknown) => err,
  );
  await point.arrived;
  stop.abort(stopped);
  const late = new Promise((resolve) => setTimeout(() => resolve('still held 1 s after the abort'), 1_000));
  expect(await Promise.race([held, late]), 'what the held caller got when the signal aborted').toBe(stopped);
  // A later caller still passes, and a release after the abort changes nothing.
  await point.wait({ id: 'job-1' }, { signal: stop.signal });
  point.release();

  const already = hold();
  const underAborted = already.wait(AbortSignal.abort(stopped)).catch((err: unknown) => err);
  expect(await Promise.race([underAborted, late]), 'held under a signal aborted already').toBe(stopped);
  const released = hold();
  const waiting = released.wait({ signal: new AbortController().signal });
  released.release();
  await expect(waiting).resolves.toBeUndefined();
});
