// The demo's public surface: run it as a function (the CLI prints it, the system test asserts
// on it), judge a final state, and start the three services together.
export { runDemo, type DemoResult } from './scenario.js';
export { DEMO_DEFAULTS, resolveDemoOptions, type DemoOptions, type ResolvedDemoOptions } from './options.js';
export { judgeDemo, type Check, type FinalState, type Freeze, type Kill, type ScenarioRecord } from './verdict.js';
export { demoJobs, seededRandom, type DemoJob } from './jobs.js';
export { formatEntry, describeEvent, formatChecks, type TimelineEntry } from './timeline.js';
export { renderTimelineHtml, type TimelineInput } from './timeline-html.js';
export { startServices, type RunningServices, type StartOptions } from './start.js';
