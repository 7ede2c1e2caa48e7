#!/usr/bin/env node
// What the live page costs the queue: one `leasehold queue` process, client loops doing claim +
// finish for a fixed time, with and without a headless Chromium tab on /ui polling /ui/state
// every second. The two take turns in short slices, round after round, so load from elsewhere
// on the machine falls on both alike. Needs `npm run build` first and Debian's chromium.
//
//   node scripts/ui-cost.mjs [--rounds 30] [--slice-ms 1000] [--loops 4] [--fetch]
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CHROMIUM, launchHeadless } from './chromium.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const CLI = join(ROOT, 'dist', 'cli', 'leasehold.js');

function flag(name, fallback) {
  const at = process.argv.indexOf(`--${name}`);
  if (at === -1) return fallback;
  const value = Number(process.argv[at + 1]);
  if (!Number.isSafeInteger(value) || value < 1) throw new Error(`--${name} must be a positive integer`);
  return value;
}

const rounds = flag('rounds', 30);
const sliceMs = flag('slice-ms', 1000);
const loops = flag('loops', 4);
// --fetch: poll /ui/state from this process instead of a browser, to tell the queue's share of
// the cost from the browser's own CPU on the same machine.
const viaFetch = process.argv.includes('--fetch');

if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run "npm run build" first.`);
if (!viaFetch && !existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM}: apt-get install chromium.`);
const { QueueClient, openQueueStore } = await import(join(ROOT, 'dist', 'queue', 'index.js'));

const dir = mkdtempSync(join(tmpdir(), 'leasehold-ui-cost-'));
const db = join(dir, 'queue.sqlite');
const queue = spawn(process.execPath, [CLI, 'queue', '--port', '0', '--db', db, '--log-level', 'silent'], {
  stdio: ['ignore', 'pipe', 'inherit'],
});
const url = await new Promise((done, fail) => {
  let out = '';
  queue.stdout.on('data', (chunk) => {
    out += chunk;
    const match = /listening on (http:\/\/\S+)/.exec(out);
    if (match) done(match[1]);
  });
  queue.on('exit', (code) => fail(new Error(`the queue exited (${code}) before listening`)));
});
// Jobs are added untimed between slices, through a store of this process on the same file.
const seeder = await openQueueStore({ db });
const clients = Array.from({ length: loops }, () => new QueueClient(url));
let seq = 0;

async function topUp(target) {
  const { pending } = await seeder.stats();
  if (pending >= target / 2) return;
  const ids = Array.from({ length: target - pending }, () => `cost-${seq++}`);
  for (let i = 0; i < ids.length; i += 500) {
    await Promise.all(
      ids.slice(i, i + 500).map((id) =>
        seeder.enqueue({
          id,
          qty: 1,
          payload: null,
          maxAttempts: 5,
          priority: 0,
          runAt: undefined,
          deadline: undefined,
          deadlineMs: undefined,
          request: JSON.stringify({ id, qty: 1 }),
        }),
      ),
    );
  }
}

/**
 * The page: a browser tab open on /ui throughout, frozen between its turns (a frozen page runs
 * no timers, so it polls nothing), or with --fetch a timer in this process.
 */
async function openPage() {
  let polls = 0;
  if (viaFetch) {
    let timer;
    return {
      polls: () => polls,
      on() {
        timer = setInterval(() => {
          polls += 1;
          fetch(`${url}/ui/state`).then(
            (res) => res.arrayBuffer(),
            () => {},
          );
        }, 1000);
      },
      off: async () => clearInterval(timer),
      close: async () => clearInterval(timer),
    };
  }
  const browser = await launchHeadless();
  const page = await browser.newPage();
  page.on('request', (req) => req.url().endsWith('/ui/state') && (polls += 1));
  await page.goto(`${url}/ui`);
  await page.locator('#count-pending').filter({ hasNotText: '–' }).waitFor();
  const cdp = await page.context().newCDPSession(page);
  const lifecycle = (state) => cdp.send('Page.setWebLifecycleState', { state });
  await lifecycle('frozen');
  return {
    polls: () => polls,
    on: () => lifecycle('active'),
    off: () => lifecycle('frozen'),
    close: () => browser.close(),
  };
}

/** Claim + finish in `loops` loops for `sliceMs`. */
async function slice() {
  let cycles = 0;
  let dry = false;
  const cpuBefore = queueCpuMs();
  const started = performance.now();
  const end = started + sliceMs;
  await Promise.all(
    clients.map(async (client, i) => {
      const owner = `loop-${i}`;
      while (performance.now() < end) {
        const lease = await client.claim(owner, 30_000);
        if (!lease) {
          dry = true;
          return;
        }
        await client.finish(lease.id, { owner, token: lease.token });
        cycles += 1;
      }
    }),
  );
  if (dry) throw new Error('the loops ran out of jobs between two top-ups');
  return { jobs: cycles, ms: performance.now() - started, cpuMs: queueCpuMs() - cpuBefore };
}

/** The queue process's CPU time so far (user + system, in clock ticks of 10 ms), from /proc. */
function queueCpuMs() {
  const fields = readFileSync(`/proc/${queue.pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

const page = await openPage();
try {
  process.stdout.write(
    `ui cost: ${loops} loops of claim + finish against one queue process (SQLite); ${rounds} rounds of ` +
      `${sliceMs} ms without and ${sliceMs} ms with ${viaFetch ? 'a fetch of /ui/state every second' : 'a headless Chromium tab on /ui'}, order alternating\n`,
  );
  await topUp(2000);
  const warm = await slice();
  // Topped up when half is gone: always at least three slices' worth pending.
  const backlog = Math.max(2000, Math.ceil((warm.jobs / warm.ms) * sliceMs * 6));
  const total = { off: { jobs: 0, ms: 0, cpuMs: 0 }, on: { jobs: 0, ms: 0, cpuMs: 0 } };
  const ratios = [];
  let onMs = 0;
  for (let round = 1; round <= rounds; round += 1) {
    await topUp(backlog);
    const result = {};
    for (const turn of round % 2 ? ['off', 'on'] : ['on', 'off']) {
      if (turn === 'on') await page.on();
      result[turn] = await slice();
      if (turn === 'on') {
        await page.off();
        onMs += result.on.ms;
      }
      for (const key of ['jobs', 'ms', 'cpuMs']) total[turn][key] += result[turn][key];
    }
    ratios.push(result.on.jobs / result.on.ms / (result.off.jobs / result.off.ms));
    if (round % 5 === 0 || round === rounds) process.stdout.write(`  ${round} rounds done\n`);
  }
  const rate = (t) => (t.jobs / t.ms) * 1000;
  const ratio = rate(total.on) / rate(total.off);
  const cpu = (t) => t.cpuMs / t.jobs;
  process.stdout.write(
    `without the page ${rate(total.off).toFixed(0)} jobs/s, with it ${rate(total.on).toFixed(0)} jobs/s ` +
      `(${((page.polls() * 1000) / onMs).toFixed(2)} polls/s while it was open)\n` +
      `throughput with/without: ${ratio.toFixed(3)} over all slices (median of rounds ${median(ratios).toFixed(3)}), ` +
      `a cost of ${((1 - ratio) * 100).toFixed(1)} %\n` +
      `queue CPU per job: ${cpu(total.off).toFixed(3)} ms without, ${cpu(total.on).toFixed(3)} ms with the page\n`,
  );
} finally {
  await page.close();
  for (const client of clients) client.close();
  await seeder.close();
  queue.kill('SIGTERM');
  await new Promise((done) => queue.once('exit', done));
  rmSync(dir, { recursive: true, force: true });
}
