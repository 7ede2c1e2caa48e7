#!/usr/bin/env node
// What hostile bodies cost everyone else: one `leasehold queue` process with an API key, its
// `GET /healthz` latency measured while (1) 20 callers without the key each post a 1 MiB body,
// to `/healthz` and to a keyed route, and (2) 8 keyed callers each enqueue a 1 MiB payload of
// 90,000 keys at once. With --listing, instead: 560 jobs of 1 MB payloads, and what one
// `GET /jobs?limit=1000` answers and costs the queue (its time, size, and the process's peak
// resident memory). Needs `npm run build` first.
//
//   node scripts/edge-cost.mjs [--rounds 5] [--listing]
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const CLI = join(ROOT, 'dist', 'cli', 'leasehold.js');
const KEY = 'edge-cost-key-0123456789';
const MIB = 1024 * 1024;

const at = process.argv.indexOf('--rounds');
const rounds = at === -1 ? 5 : Number(process.argv[at + 1]);
if (!Number.isSafeInteger(rounds) || rounds < 1) throw new Error('--rounds must be a positive integer');
if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run "npm run build" first.`);

const dir = mkdtempSync(join(tmpdir(), 'leasehold-edge-cost-'));
const queue = spawn(
  process.execPath,
  [CLI, 'queue', '--port', '0', '--db', join(dir, 'queue.sqlite'), '--log-level', 'silent'],
  { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, LEASEHOLD_API_KEY: KEY } },
);
const base = await new Promise((done, fail) => {
  let out = '';
  queue.stdout.on('data', (chunk) => {
    out += chunk;
    const match = /listening on (http:\/\/\S+)/.exec(out);
    if (match) done(new URL(match[1]));
  });
  queue.on('exit', (code) => fail(new Error(`the queue exited (${code}) before listening`)));
});

/** One request on a fresh connection; resolves with the status when the answer has been read. */
function send(method, path, headers, body) {
  return new Promise((done, fail) => {
    const req = request({ host: base.hostname, port: base.port, method, path, headers, agent: false }, (res) => {
      res.resume();
      res.on('end', () => done(res.statusCode));
    });
    req.on('error', fail);
    req.end(body);
  });
}

/** GET /healthz every 5 ms until `done` settles; the slowest answer and the median, in ms. */
async function healthzWhile(done) {
  const times = [];
  let over = false;
  void done.finally(() => (over = true));
  while (!over) {
    const started = performance.now();
    await send('GET', '/healthz', {});
    times.push(performance.now() - started);
    await new Promise((r) => setTimeout(r, 5));
  }
  times.sort((a, b) => a - b);
  return { max: times.at(-1), median: times[Math.floor(times.length / 2)] };
}

const unkeyedBody = Buffer.from(`{bad${' '.repeat(MIB - 4)}`);
const json = { 'content-type': 'application/json' };
const keyed = { ...json, authorization: `Bearer ${KEY}` };
/** 90,000 keys in just under 1 MiB. */
function manyKeys(seed) {
  const payload = {};
  for (let i = 0; i < 90_000; i++) payload[`${seed}${i.toString(36).padStart(4, '0')}`] = 1;
  return Buffer.from(JSON.stringify({ qty: 1, payload }));
}

const cases = {
  'unkeyed 1 MiB x20 to POST /healthz': () =>
    Promise.all(Array.from({ length: 20 }, () => send('POST', '/healthz', json, unkeyedBody))),
  'unkeyed 1 MiB x20 to POST /jobs': () =>
    Promise.all(Array.from({ length: 20 }, () => send('POST', '/jobs', json, unkeyedBody))),
  'keyed 1 MiB of 90k keys x8 to POST /jobs': () =>
    Promise.all(Array.from({ length: 8 }, (_, i) => send('POST', '/jobs', keyed, manyKeys(`k${i}`)))),
};

/** GET `path` with the key: status, bytes and milliseconds. */
function measure(path) {
  return new Promise((done, fail) => {
    const started = performance.now();
    const req = request({ host: base.hostname, port: base.port, path, headers: keyed, agent: false }, (res) => {
      let bytes = 0;
      res.on('data', (chunk) => (bytes += chunk.length));
      res.on('end', () => done({ status: res.statusCode, bytes, ms: performance.now() - started }));
    });
    req.on('error', fail);
    req.end();
  });
}

/** The queue process's peak resident memory so far, in MiB (Linux). */
function peakMiB() {
  const status = readFileSync(`/proc/${queue.pid}/status`, 'utf8');
  return Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? NaN) / 1024;
}

async function listing() {
  const payload = 'x'.repeat(1_000_000);
  for (let i = 0; i < 560; i += 8) {
    await Promise.all(
      Array.from({ length: 8 }, (_, j) =>
        send('POST', '/jobs', keyed, Buffer.from(JSON.stringify({ id: `big-${i + j}`, qty: 1, payload }))),
      ),
    );
  }
  const before = peakMiB();
  const full = await measure('/jobs?limit=1000');
  const lean = await measure('/jobs?limit=1000&lean=true');
  console.log(
    `GET /jobs?limit=1000 over 560 jobs of 1 MB: ${full.status}, ${(full.bytes / 2 ** 20).toFixed(1)} MiB in ${full.ms.toFixed(0)} ms; ` +
      `lean=true: ${lean.status}, ${(lean.bytes / 1024).toFixed(0)} KiB in ${lean.ms.toFixed(0)} ms; ` +
      `queue peak RSS ${before.toFixed(0)} MiB after seeding, ${peakMiB().toFixed(0)} MiB after both`,
  );
}

try {
  await send('GET', '/healthz', {});
  if (process.argv.includes('--listing')) {
    await listing();
    process.exitCode = 0;
  } else
    for (const [name, load] of Object.entries(cases)) {
      const maxes = [];
      const medians = [];
      let statuses;
      for (let round = 0; round < rounds; round++) {
        const running = load();
        const { max, median } = await healthzWhile(running);
        statuses = [...new Set(await running)].join(',');
        maxes.push(max);
        medians.push(median);
      }
      maxes.sort((a, b) => a - b);
      const shown = (ms) => `${ms.toFixed(1)} ms`;
      console.log(
        `${name}: answered ${statuses}; GET /healthz slowest ${shown(maxes[Math.floor(rounds / 2)])} (median of ${rounds} rounds, worst ${shown(maxes.at(-1))}), typical ${shown(medians.sort((a, b) => a - b)[Math.floor(rounds / 2)])}`,
      );
    }
} finally {
  queue.kill('SIGTERM');
  await new Promise((r) => queue.once('exit', r));
  rmSync(dir, { recursive: true, force: true });
}
