// `npm run bench`: how close the queue, the HTTP service and the whole system come to the
// physical limit of their storage, measured side by side on this machine in the same run, and
// how many transactions, statements and requests each job costs.
import { Command, Option } from 'commander';
import { rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { checkOptions, LOG_LEVELS, parseAutoOrWholeNumber, parseWholeNumber, usageErrors } from '../platform/flags.js';
import { analyse } from './analysis.js';
import { installCounters } from './counting.js';
import {
  DEFAULT_BACKLOG,
  DEFAULT_E2E_CONCURRENCY,
  DEFAULT_E2E_PROCESSES,
  DEFAULT_PAIR_MS,
  DEFAULT_SLICE_MS,
  DEFAULT_WORKERS,
  PRESETS,
  resolveOptions,
  type BenchFlags,
} from './options.js';
import { runProfile } from './profile.js';
import { renderProfile, summarizeProfile } from './profile-report.js';
import { renderJson, renderText } from './report.js';
import { killAll, logServicesInto, passNodeFlags, profileChildrenInto } from './processes.js';
import { renderTestkit, runTestkitBench } from './testkit.js';
import { renderWaves, runWaves } from './waves.js';
import { cleanUpInterruptedRun, makeRunDir, runBench } from './run.js';

const { full, quick } = PRESETS;
/** `--waves`: the worker's concurrency, windows and their length unless flags say otherwise, and the warm-up. */
const WAVES_CONCURRENCY = 8;
const WAVES_ROUNDS = 5;
const WAVES_WINDOW_MS = 3_000;
const WAVES_WARM_UP_MS = 3_000;
/** Rounds of `--testkit` unless --rounds says otherwise. */
const TESTKIT_ROUNDS = 20;
const program = new Command('npm run bench --')
  .description(
    'Measure the queue, the queue over HTTP and the whole system against the raw SQLite write limit of the same disk, ' +
      'round after round, print each as a ratio taken within the round, and check the goals.',
  )
  .option(
    '--quick',
    `short run, under a minute: ${quick.warmUpRounds} warm-up and ${quick.rounds} measured rounds of ${quick.windowMs} ms, ${quick.samples} latency samples, no reference columns, no breakdown`,
  )
  .option(
    '--peers',
    "also BullMQ (its own redis-server, AOF appendfsync always), graphile-worker (on the local PostgreSQL, or --postgres) and a BullMQ + idempotency-key reference, beside leasehold's worker library and `leasehold worker`, and print leasehold / peer per column",
  )
  .option('--references', 'measure the reference columns too (the default in a full run)')
  .option('--no-references', 'skip the reference columns: bare node:http front, processes on one file, minimal worker')
  .option(
    '--columns <ids>',
    'only these columns (comma-separated ids, as in --json), with the limit: to profile one in isolation',
  )
  .option('--json', 'print the results as JSON on stdout (progress still goes to stderr)')
  .option(
    '--testkit',
    `only the test kit: startSystem(), reset() and the whole zombie test, in process, ${TESTKIT_ROUNDS} rounds (--rounds) after a warm-up`,
  )
  .option(
    '--waves',
    `only where an end-to-end wave's time goes: one \`leasehold worker --concurrency ${WAVES_CONCURRENCY}\` (or --e2e-concurrency) on a system of its own, rollback journal then WAL, each service's time per request by route from its GET /metrics, ${WAVES_ROUNDS} windows (--rounds) of ${WAVES_WINDOW_MS} ms (--window-ms) after ${WAVES_WARM_UP_MS} ms of warm-up`,
  )
  .addOption(
    new Option('--rounds <n>', `rounds (default ${full.rounds}, --quick ${quick.rounds})`).argParser(parseWholeNumber),
  )
  .addOption(
    new Option(
      '--warm-up-rounds <n>',
      `rounds run first and not counted, every column in turn as in a measured round, so that no column is measured cold (default ${full.warmUpRounds}, --quick ${quick.warmUpRounds})`,
    ).argParser(parseWholeNumber),
  )
  .addOption(
    new Option(
      '--window-ms <ms>',
      `measured time per column and round (default ${full.windowMs}, --quick ${quick.windowMs})`,
    ).argParser(parseWholeNumber),
  )
  .addOption(
    new Option('--slice-ms <ms>', 'columns take turns in slices of this length within a round')
      .argParser(parseWholeNumber)
      .default(DEFAULT_SLICE_MS),
  )
  .addOption(
    new Option(
      '--pair-ms <ms>',
      'the limit also runs this long just before each slice of every other column, and each ratio divides by it (0: by the limit of the whole round)',
    )
      .argParser(parseWholeNumber)
      .default(DEFAULT_PAIR_MS),
  )
  .addOption(
    new Option(
      '--samples <n>',
      `latency samples of each kind per round (default ${full.samples}, --quick ${quick.samples})`,
    ).argParser(parseWholeNumber),
  )
  .addOption(
    new Option('--backlog <n>', 'pending jobs at the start of each slice, on top of what the slice can consume')
      .argParser(parseWholeNumber)
      .default(DEFAULT_BACKLOG),
  )
  .addOption(
    new Option('--workers <n>', 'concurrent loops of the library and HTTP columns')
      .argParser(parseWholeNumber)
      .default(DEFAULT_WORKERS),
  )
  .addOption(
    new Option('--e2e-processes <n>', 'worker processes end to end (and queue library processes on one file)')
      .argParser(parseWholeNumber)
      .default(DEFAULT_E2E_PROCESSES),
  )
  .addOption(
    new Option(
      '--e2e-concurrency <n>',
      'jobs each worker process runs at once end to end (`leasehold worker --concurrency`)',
    )
      .argParser(parseWholeNumber)
      .default(DEFAULT_E2E_CONCURRENCY),
  )
  .addOption(
    new Option(
      '--prefetch <n>',
      "with --peers: leases leasehold's worker library and `leasehold worker` hold beyond their concurrency (the worker's prefetch: a whole number, or auto)",
    )
      .argParser(parseAutoOrWholeNumber)
      .default('auto'),
  )
  .option(
    '--dir <path>',
    'parent folder for the databases (default: the temp folder if on the same device as the repository, else .bench/)',
  )
  .option('--keep', 'keep the databases afterwards')
  .option(
    '--postgres <url>',
    'also measure PostgreSQL at this URL: its own write limit, the queue library and the queue over HTTP, each in a schema of its own, dropped afterwards',
  )
  .option('--profile', 'run the breakdown of where the time of one library cycle goes (the default in a full run)')
  .option('--no-profile', 'skip that breakdown')
  .option('--profile-only', 'only the breakdown of the library cycle, not the main table')
  .addOption(
    new Option(
      '--profile-rounds <n>',
      `rounds of the breakdown (default ${full.profile.rounds}, --quick ${quick.profile.rounds})`,
    ).argParser(parseWholeNumber),
  )
  .option(
    '--cpu-prof-dir <dir>',
    'write a V8 CPU profile of every service, reference front and worker process into <dir>; summarise with `node dist/bench/cpu-profiles.js <dir>`',
  )
  .addOption(
    new Option(
      '--service-log-level <level>',
      "the services' log level, their JSON lines each going to a file of its own under the run's folder (kept with --keep), as an operator would keep them: what logging costs",
    )
      .choices(LOG_LEVELS)
      .default('silent'),
  )
  .option(
    '--node-flags <flags>',
    'Node.js or V8 flags, space-separated, for every Node.js process the benchmark starts (services, worker processes, reference fronts), e.g. "--no-opt" to run them without V8\'s optimizing compiler',
  )
  .addHelpText(
    'after',
    [
      '',
      'Columns: the limit (BEGIN IMMEDIATE; UPDATE one row; COMMIT on the bare sqlite3 driver, rollback journal,',
      'synchronous=FULL) and the same in WAL; the queue library (store.finishAndClaim loops); the queue over HTTP (a',
      '`leasehold queue` child process, --journal delete or wal, and QueueClient loops each finishing its job and',
      'claiming the next in one request); end to end (queue, receiver and gateway child processes and `leasehold',
      "worker --concurrency` processes; the benchmark's own minimal worker as a reference). tx/job counts durable",
      "commits (SQLite's file change counter, or its WAL index's; PostgreSQL COMMITs); stmt/job the statements",
      'every process serving the column handed its driver; req/job the HTTP requests its services received.',
      'Then pickup latency (a job enqueued while a worker waits in a long poll), gateway latency, peak memory and',
      'the goals. docs/benchmarks.md explains each.',
    ].join('\n'),
  );

usageErrors(program, 'npm run bench');
program.parse(process.argv);
const flags = program.opts<BenchFlags>();
if (flags.testkit) {
  // Its own measurement, in this process: none of the main table's databases, children or counters.
  const figures = await runTestkitBench(flags.rounds ?? TESTKIT_ROUNDS, (line) => process.stderr.write(`${line}\n`));
  process.stdout.write(`${flags.json ? JSON.stringify({ testkit: figures }) : renderTestkit(figures)}\n`);
  process.exit(0);
}
installCounters();
const options = checkOptions(program, {}, () => resolveOptions(flags));
if (flags.nodeFlags) passNodeFlags(flags.nodeFlags.split(/\s+/).filter(Boolean));
if (flags.cpuProfDir) profileChildrenInto(resolve(flags.cpuProfDir));
const progress = (line: string) => process.stderr.write(`${line}\n`);
const dir = makeRunDir(options);
if (flags.serviceLogLevel && flags.serviceLogLevel !== 'silent')
  logServicesInto(flags.serviceLogLevel, join(dir, 'logs'));
process.on('exit', killAll);
for (const [signal, code] of [
  ['SIGINT', 130],
  ['SIGTERM', 143],
] as const) {
  process.once(signal, () => {
    progress(`${signal}: stopping; databases ${options.keep ? 'kept' : 'removed'} (${dir})`);
    killAll();
    if (!options.keep) rmSync(dir, { recursive: true, force: true });
    // PostgreSQL schemas are dropped too, within a few seconds; a second signal exits at once.
    process.once(signal, () => process.exit(code));
    const giveUp = setTimeout(() => process.exit(code), 10_000);
    cleanUpInterruptedRun()
      .catch((err: unknown) => progress(`could not drop the PostgreSQL schemas: ${(err as Error).message}`))
      .finally(() => {
        clearTimeout(giveUp);
        process.exit(code);
      });
  });
}
if (flags.waves) {
  try {
    const figures = await runWaves({
      dir,
      journals: ['delete', 'wal'],
      concurrency:
        program.getOptionValueSource('e2eConcurrency') === 'default' ? WAVES_CONCURRENCY : options.e2eConcurrency,
      rounds: flags.rounds ?? WAVES_ROUNDS,
      windowMs: flags.windowMs ?? WAVES_WINDOW_MS,
      warmUpMs: WAVES_WARM_UP_MS,
      progress,
    });
    process.stdout.write(`${flags.json ? JSON.stringify({ waves: figures }) : renderWaves(figures)}\n`);
  } finally {
    if (!options.keep) rmSync(dir, { recursive: true, force: true });
  }
  process.exit(0);
}
progress(
  options.profileOnly
    ? `leasehold benchmark: the breakdown of one library cycle only, in ${dir}`
    : `leasehold benchmark: ${options.rounds} rounds of ${options.windowMs} ms per column in ${dir}`,
);
try {
  const run = options.profileOnly ? null : await runBench(options, dir, progress);
  const analysis = run ? analyse(run) : null;
  const profile = options.profile ? await runProfile(dir, options.profile, progress) : null;
  const profileSummary = profile ? summarizeProfile(profile) : null;
  if (options.json) {
    process.stdout.write(
      `${renderJson(run, analysis, { profile: profileSummary, profileRounds: profile?.rounds ?? null })}\n`,
    );
  } else {
    const sections = [
      run && analysis ? renderText(run, analysis) : null,
      profile && profileSummary ? renderProfile(profile, profileSummary) : null,
    ];
    process.stdout.write(`${sections.filter((s) => s !== null).join('\n\n')}\n`);
  }
} catch (err) {
  // A --columns naming no column is only found once the columns are known.
  if (!(err instanceof RangeError)) throw err;
  progress(`npm run bench: ${err.message}`);
  process.exitCode = 2;
} finally {
  if (!options.keep) rmSync(dir, { recursive: true, force: true });
}
