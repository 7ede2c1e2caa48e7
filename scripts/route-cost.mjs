#!/usr/bin/env node
// CPU per request, route by route, of each service as a child process: `leasehold queue`,
// `receiver` and `gateway` started through the CLI of one or more builds (dist folders), each
// route sent N times by `--concurrency` callers on keep-alive connections, and the service's CPU
// (every thread, the SQLite pool included, read from /proc/<pid>/task/*/schedstat) divided by N.
// Several builds are measured in the same run, in turns, so their figures compare side by side:
//
//   cp -r dist .bench/before-dist   # the build to compare with, before the change
//   npm run build && node scripts/route-cost.mjs .bench/before-dist dist [--n 2000] [--rounds 3]
//     [--concurrency 8] [--log-level silent]
//
// Two floors are measured the same way in each round: GET /healthz on bare node:http and on
// express alone (scripts/route-floor.mjs), what the HTTP stack costs before any of ours.
//
// Linux only (schedstat). The figures are medians over the rounds, in µs of CPU per request.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const at = args.indexOf(`--${name}`);
  if (at === -1) return fallback;
  const [value] = args.splice(at, 2).slice(1);
  return value;
};
const N = Number(option('n', '2000'));
const ROUNDS = Number(option('rounds', '3'));
const CONCURRENCY = Number(option('concurrency', '8'));
const LOG_LEVEL = option('log-level', 'silent');
/** Items per request of the batch routes. */
const BATCH = 8;
const builds = (args.length > 0 ? args : ['dist']).map((dir) => resolve(dir));
for (const dir of builds) {
  if (!existsSync(join(dir, 'cli', 'leasehold.js'))) throw new Error(`${dir}/cli/leasehold.js is missing: build first`);
}

/** CPU time of every thread of `pid` so far, in ns. */
function cpuNs(pid) {
  let total = 0;
  for (const task of readdirSync(`/proc/${pid}/task`)) {
    try {
      total += Number(readFileSync(`/proc/${pid}/task/${task}/schedstat`, 'utf8').split(' ')[0]);
    } catch {
      // The thread ended between the listing and the read.
    }
  }
  return total;
}

function startService(build, command, argv) {
  return listening(
    spawn(
      process.execPath,
      [join(build, 'cli', 'leasehold.js'), command, '--port', '0', '--log-level', LOG_LEVEL, ...argv],
      {
        stdio: ['ignore', 'pipe', 'ignore'],
      },
    ),
    `leasehold ${command}`,
  );
}

/** The floors: GET /healthz on bare node:http and on express alone (scripts/route-floor.mjs). */
const FLOORS = [
  ['floor: bare node:http GET /healthz', 'http'],
  ['floor: express alone GET /healthz', 'express'],
];

function startFloor(kind) {
  const script = join(dirname(fileURLToPath(import.meta.url)), 'route-floor.mjs');
  return listening(
    spawn(process.execPath, [script, kind], { stdio: ['ignore', 'pipe', 'ignore'] }),
    `route-floor ${kind}`,
  );
}

/** Resolves with the child and its URL once it prints "listening on <url>". */
function listening(child, name) {
  return new Promise((done, fail) => {
    let out = '';
    child.stdout.on('data', (chunk) => {
      out += chunk;
      const match = /listening on (http:\/\/\S+)/.exec(out);
      if (match) done({ child, url: new URL(match[1].replace(/\/$/, '')) });
    });
    child.on('exit', (code) => fail(new Error(`${name} exited (${code}) before listening`)));
  });
}

const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY });

/** One request; resolves with the status and the parsed answer (or null). */
function send(url, method, path, body, headers = {}) {
  const text = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((done, fail) => {
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        method,
        path,
        agent,
        headers: text === undefined ? headers : { 'content-type': 'application/json', ...headers },
      },
      (res) => {
        const chunks = [];
        res.on('data', (chunk) => chunks.push(chunk));
        res.on('end', () => {
          const raw = Buffer.concat(chunks).toString();
          done({ status: res.statusCode, body: raw === '' ? null : JSON.parse(raw) });
        });
      },
    );
    req.on('error', fail);
    req.end(text);
  });
}

/**
 * Sends `make(i)` for i in from..to-1, CONCURRENCY at a time, into `answers`; returns the CPU
 * each of `pids` spent meanwhile, in ns.
 */
async function chunk(pids, from, to, make, expect, answers) {
  const before = pids.map(cpuNs);
  let next = from;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < to) {
        const i = next++;
        const answer = await make(i);
        if (!expect.includes(answer.status)) {
          throw new Error(`request ${i} answered ${answer.status}: ${JSON.stringify(answer.body)}`);
        }
        answers[i] = answer.body;
      }
    }),
  );
  return pids.map((pid, k) => cpuNs(pid) - before[k]);
}

/** The three services of one build, on their own databases. */
async function startSystem(build) {
  const dir = mkdtempSync(join(tmpdir(), 'leasehold-route-cost-'));
  const services = [];
  const stop = async () => {
    for (const { child } of services) child.kill('SIGTERM');
    await Promise.all(
      services.map(({ child }) => new Promise((done) => (child.exitCode !== null ? done() : child.once('exit', done)))),
    );
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const [queue, receiver] = await Promise.all([
      startService(build, 'queue', ['--db', join(dir, 'queue.sqlite')]),
      startService(build, 'receiver', ['--db', join(dir, 'receiver.sqlite')]),
    ]);
    services.push(queue, receiver);
    const gateway = await startService(build, 'gateway', ['--queue', queue.url.href, '--receiver', receiver.url.href]);
    services.push(gateway);
    return { queue, receiver, gateway, stop, state: {} };
  } catch (err) {
    await stop();
    throw err;
  }
}

const presented = (lease) => ({ owner: lease.owner, token: lease.token });

/**
 * The routes, in the order they run: what each sends for request i (`sys.state` holds what
 * earlier phases answered), the statuses it expects, whose CPU is counted, and where the answers go.
 */
const PHASES = [
  { name: 'queue GET /healthz', make: (s) => send(s.queue.url, 'GET', '/healthz') },
  {
    name: 'queue POST /jobs',
    count: 3,
    expect: [201],
    make: (s, i) => send(s.queue.url, 'POST', '/jobs', { qty: 1, payload: { n: i, note: 'route-cost' } }),
  },
  {
    name: 'queue POST /claims',
    keep: 'leases',
    make: (s, i) => send(s.queue.url, 'POST', '/claims', { owner: `w${i % 8}`, leaseMs: 600_000 }),
    pick: (answer) => answer.lease,
  },
  {
    name: 'queue POST /jobs/:id/heartbeat',
    make: (s, i) => send(s.queue.url, 'POST', `/jobs/${s.state.leases[i].id}/heartbeat`, presented(s.state.leases[i])),
  },
  {
    name: 'queue POST /jobs/:id/verify',
    make: (s, i) => send(s.queue.url, 'POST', `/jobs/${s.state.leases[i].id}/verify`, presented(s.state.leases[i])),
  },
  { name: 'queue GET /jobs/:id', make: (s, i) => send(s.queue.url, 'GET', `/jobs/${s.state.leases[i].id}`) },
  {
    name: 'queue POST /jobs/:id/finish next',
    keep: 'nexts',
    pick: (answer) => answer.next,
    make: (s, i) =>
      send(s.queue.url, 'POST', `/jobs/${s.state.leases[i].id}/finish`, {
        ...presented(s.state.leases[i]),
        next: true,
      }),
  },
  {
    name: 'queue POST /jobs/:id/finish',
    make: (s, i) => send(s.queue.url, 'POST', `/jobs/${s.state.nexts[i].id}/finish`, presented(s.state.nexts[i])),
  },
  {
    name: 'receiver POST /effects',
    who: ['receiver'],
    expect: [201],
    make: (s, i) =>
      send(s.receiver.url, 'POST', '/effects', { jobId: `direct-${i}`, qty: 1 }, { 'fencing-token': '1' }),
  },
  {
    name: null,
    keep: 'held',
    pick: (answer) => answer.lease,
    make: (s, i) => send(s.queue.url, 'POST', '/claims', { owner: `g${i % 8}`, leaseMs: 600_000 }),
  },
  {
    name: 'gateway POST /send',
    who: ['gateway', 'queue', 'receiver'],
    make: (s, i) => {
      const { id, owner, token } = s.state.held[i];
      return send(s.gateway.url, 'POST', '/send', { jobId: id, owner, token, qty: 1 });
    },
  },
  // The batch routes a worker at `concurrency` 8 uses end to end, each request carrying 8: their
  // figures are per request (per 8 jobs), to be read against the single routes above times 8.
  {
    name: null,
    count: BATCH,
    expect: [201],
    make: (s, i) => send(s.queue.url, 'POST', '/jobs', { qty: 1, payload: { n: i, note: 'route-cost batch' } }),
  },
  {
    name: null,
    keep: 'batched',
    pick: (answer) => answer.leases,
    make: (s, i) => send(s.queue.url, 'POST', '/claims', { owner: `b${i}`, leaseMs: 600_000, max: BATCH }),
  },
  {
    name: `queue POST /verifications (${BATCH})`,
    make: (s, i) =>
      send(s.queue.url, 'POST', '/verifications', {
        leases: s.state.batched[i].map((lease) => ({ id: lease.id, ...presented(lease) })),
      }),
  },
  {
    name: `receiver POST /effects?batch (${BATCH})`,
    who: ['receiver'],
    make: (s, i) =>
      send(s.receiver.url, 'POST', '/effects?batch', {
        effects: Array.from({ length: BATCH }, (_, k) => ({ jobId: `batch-${i}-${k}`, qty: 1, token: 1 })),
      }),
  },
  {
    name: `gateway POST /sends (${BATCH})`,
    who: ['gateway', 'queue', 'receiver'],
    make: (s, i) =>
      send(s.gateway.url, 'POST', '/sends', {
        sends: s.state.batched[i].map((lease) => ({ jobId: lease.id, ...presented(lease), qty: 1 })),
      }),
  },
  {
    name: `queue POST /finishes next (${BATCH})`,
    make: (s, i) =>
      send(s.queue.url, 'POST', '/finishes', {
        owner: s.state.batched[i][0].owner,
        finishes: s.state.batched[i].map((lease) => ({ id: lease.id, token: lease.token })),
        next: true,
      }),
  },
];

/** Chunks per phase: the builds take turns this often, so both see the same load on the machine. */
const CHUNKS = 10;

const totals = builds.map(() => ({}));
const floors = {};
for (let round = 0; round < ROUNDS; round++) {
  for (const [name, kind] of FLOORS) {
    const floor = await startFloor(kind);
    try {
      for (let i = 0; i < 300; i++) await send(floor.url, 'GET', '/healthz');
      const [ns] = await chunk([floor.child.pid], 0, N, () => send(floor.url, 'GET', '/healthz'), [200], []);
      (floors[name] ??= []).push(ns / 1000 / N);
    } finally {
      floor.child.kill('SIGTERM');
      await new Promise((done) => (floor.child.exitCode !== null ? done() : floor.child.once('exit', done)));
    }
  }
  const systems = [];
  try {
    for (const build of builds) systems.push(await startSystem(build));
    // Warm every service up first, so the JIT has compiled what the measured requests run.
    for (const s of systems) for (let i = 0; i < 300; i++) await send(s.queue.url, 'GET', '/healthz');
    for (const phase of PHASES) {
      const count = N * (phase.count ?? 1);
      const who = phase.who ?? ['queue'];
      const answers = systems.map(() => new Array(count));
      const spent = systems.map(() => who.map(() => 0));
      for (let c = 0; c < CHUNKS; c++) {
        const order = systems.map((_, k) => k);
        if ((c + round) % 2 === 1) order.reverse();
        for (const k of order) {
          const s = systems[k];
          const ns = await chunk(
            who.map((name) => s[name].child.pid),
            Math.floor((c * count) / CHUNKS),
            Math.floor(((c + 1) * count) / CHUNKS),
            (i) => phase.make(s, i),
            phase.expect ?? [200],
            answers[k],
          );
          ns.forEach((value, w) => (spent[k][w] += value));
        }
      }
      systems.forEach((s, k) => {
        if (phase.keep) s.state[phase.keep] = answers[k].map(phase.pick);
        if (phase.name === null) return;
        who.forEach((name, w) => {
          const row = w === 0 ? phase.name : `  ${name}, behind ${phase.name.replace(/^gateway /, '')}`;
          (totals[k][row] ??= []).push(spent[k][w] / 1000 / count);
        });
      });
    }
  } finally {
    await Promise.all(systems.map((s) => s.stop()));
  }
}
agent.destroy();

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
};
const names = Object.keys(totals[0]);
const width = Math.max(...[...names, ...Object.keys(floors)].map((name) => name.length));
const labels = builds.map((dir) => dir.replace(`${process.cwd()}/`, ''));
console.log(
  `CPU µs per request, median (least) of ${ROUNDS} rounds, ${N} requests each, ${CONCURRENCY} at a time, log level ${LOG_LEVEL}`,
);
console.log(`${''.padEnd(width)}  ${labels.map((label) => label.padStart(20)).join('  ')}`);
for (const name of names) {
  const medians = totals.map((rows) => median(rows[name]));
  const least = totals.map((rows) => Math.min(...rows[name]));
  const cells = medians.map((us, k) => `${us.toFixed(0)} (${least[k].toFixed(0)})`.padStart(20));
  const change = (values) => `${(((values.at(-1) - values[0]) / values[0]) * 100).toFixed(0)}%`;
  const changes = builds.length > 1 ? `  ${change(medians).padStart(5)} (${change(least)})` : '';
  console.log(`${name.padEnd(width)}  ${cells.join('  ')}${changes}`);
}
for (const [name, values] of Object.entries(floors)) {
  console.log(
    `${name.padEnd(width)}  ${`${median(values).toFixed(0)} (${Math.min(...values).toFixed(0)})`.padStart(20)}`,
  );
}
