// The test kit's public surface: the whole system in one call, a clock the test moves, a point
// to hold the code under test at, and assertions on the effects.
export {
  startSystem,
  type DownstreamChoice,
  type DownstreamOption,
  type StubHelpers,
  type System,
  type SystemClock,
  type SystemDownstream,
  type SystemOptions,
  type SystemWorkerOptions,
} from './system.js';
export { ManualClock } from './clock.js';
export { hold, type Hold } from './hold.js';
export { ExpectationError, type KeyChoice, type SystemEffect } from './expect.js';
