#!/usr/bin/env node
// A `leasehold queue` process's peak resident memory and CPU per job under an enqueue burst
// over HTTP, for several sets of Node.js flags side by side: each round starts one fresh queue per
// set, in turn, on a fresh SQLite file, and sends it the same burst (`--clients` at once, each
// enqueueing until `--jobs` are in), reading the child's VmRSS from /proc every 50 ms and its
// CPU (user + system) at the end. Medians over the rounds, min–max beside them.
//
//   npm run build && node scripts/memory-cost.mjs
//   node scripts/memory-cost.mjs --rounds 5 --jobs 20000 --flags '' --flags '--max-semi-space-size=4'
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const CLI = join(ROOT, 'dist/cli/leasehold.js');
const USAGE = `usage: node scripts/memory-cost.mjs [--rounds N] [--jobs N] [--clients N] [--flags 'node flags']...

  --rounds   rounds, each running every set of flags once, in turn (default 3)
  --jobs     jobs enqueued per run (default 15000)
  --clients  enqueues in flight at once (default 16)
  --flags    one set of Node.js flags for the queue process; repeatable; '' is none
             (default: '', '--max-semi-space-size=8', '--max-semi-space-size=4')`;

let args;
try {
  args = parseArgs({
    options: {
      rounds: { type: 'string', default: '3' },
      jobs: { type: 'string', default: '15000' },
      clients: { type: 'string', default: '16' },
      flags: { type: 'string', multiple: true },
      help: { type: 'boolean', short: 'h' },
    },
  }).values;
} catch (err) {
  console.error(`memory-cost: ${err.message}\n${USAGE}`);
  process.exit(2);
}
if (args.help) {
  console.log(USAGE);
  process.exit(0);
}
const count = (name) => {
  const n = Number(args[name]);
  if (!Number.isSafeInteger(n) || n < 1) {
    console.error(`memory-cost: --${name} must be a positive integer, not ${JSON.stringify(args[name])}`);
    process.exit(2);
  }
  return n;
};
const rounds = count('rounds');
const jobs = count('jobs');
const clients = count('clients');
const sets = args.flags ?? ['', '--max-semi-space-size=8', '--max-semi-space-size=4'];

const { QueueClient } = await import(join(ROOT, 'dist/queue/index.js'));

function startQueue(flags, db) {
  const child = spawn(
    process.execPath,
    [...flags.split(' ').filter(Boolean), CLI, 'queue', '--port', '0', '--db', db, '--log-level', 'warn'],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const url = new Promise((resolveUrl, reject) => {
    let seen = '';
    child.stdout.on('data', (chunk) => {
      seen += chunk;
      const match = /listening on (\S+)/.exec(seen);
      if (match) resolveUrl(match[1]);
    });
    child.once('exit', (code) => reject(new Error(`the queue (${flags || 'no flags'}) exited with ${code}`)));
  });
  return { child, url };
}

const residentMiB = (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) / 1024;
/** User + system CPU in ms, from /proc/<pid>/stat (10 ms ticks). */
const cpuMs = (pid) => {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
};

async function run(flags, dir) {
  const db = join(dir, `q-${Math.random().toString(36).slice(2)}.sqlite`);
  const { child, url } = startQueue(flags, db);
  try {
    const client = new QueueClient(await url);
    let peak = residentMiB(child.pid);
    const sampler = setInterval(() => (peak = Math.max(peak, residentMiB(child.pid))), 50);
    const cpuBefore = cpuMs(child.pid);
    let next = 0;
    await Promise.all(
      Array.from({ length: clients }, async () => {
        while (next < jobs) {
          const i = next++;
          await client.enqueue({ id: `job-${i}`, qty: 1, payload: { note: 'a small payload', i } });
        }
      }),
    );
    clearInterval(sampler);
    peak = Math.max(peak, residentMiB(child.pid));
    const result = { peakMiB: peak, cpuUsPerJob: ((cpuMs(child.pid) - cpuBefore) * 1000) / jobs };
    client.close();
    return result;
  } finally {
    child.kill('SIGTERM');
    await new Promise((done) => (child.exitCode !== null ? done() : child.once('exit', done)));
  }
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const summary = (xs, digits) =>
  `${median(xs).toFixed(digits)} (${Math.min(...xs).toFixed(digits)}–${Math.max(...xs).toFixed(digits)})`;

const dir = mkdtempSync(join(tmpdir(), 'leasehold-memory-'));
try {
  const results = new Map(sets.map((flags) => [flags, []]));
  for (let round = 1; round <= rounds; round++) {
    for (const flags of sets) results.get(flags).push(await run(flags, dir));
    process.stderr.write(`round ${round}/${rounds} done\n`);
  }
  console.log(`${jobs} enqueues, ${clients} at once, ${rounds} rounds; medians (min–max)`);
  console.log('| node flags | peak resident MiB | queue CPU µs per enqueue |');
  console.log('|---|---|---|');
  for (const [flags, runs] of results) {
    const peak = summary(
      runs.map((r) => r.peakMiB),
      1,
    );
    const cpu = summary(
      runs.map((r) => r.cpuUsPerJob),
      0,
    );
    console.log(`| ${flags ? `\`${flags}\`` : 'none'} | ${peak} | ${cpu} |`);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
