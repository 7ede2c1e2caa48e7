// Where each service's CPU went, from the V8 CPU profiles Node writes with `--cpu-prof`: one
// row per process (told apart by the modules it loaded), its busy time split by layer. Run the
// benchmark with its services profiled, then summarise:
//
//   npm run bench -- --quick --cpu-prof-dir .bench/prof
//   node dist/bench/cpu-profiles.js .bench/prof
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { PROCESS_NAMES_FILE } from './processes.js';
import { table } from './report.js';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string };
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** Layers, first match wins; a frame's layer is where its own (self) time is spent. */
const LAYERS: [string, (fn: string, url: string) => boolean][] = [
  ['idle', (fn) => fn === '(idle)'],
  ['gc', (fn) => fn === '(garbage collector)'],
  [
    'socket syscalls (writev, read...)',
    (fn, url) => url === '' && /^(writev|writeBuffer|writeUtf8String|writeLatin1String|readStart|readStop)$/.test(fn),
  ],
  [
    'express, router, body-parser',
    (_fn, url) =>
      /node_modules\/(express|router|body-parser|raw-body|iconv-lite|type-is|content-type|finalhandler|send|on-finished|statuses|mime-types|path-to-regexp|depd|qs|encodeurl|debug)\//.test(
        url,
      ),
  ],
  ['zod', (_fn, url) => url.includes('node_modules/zod/')],
  [
    'pino',
    (_fn, url) => /node_modules\/(pino|sonic-boom|fast-redact|quick-format|atomic-sleep|thread-stream)/.test(url),
  ],
  ['knex, tarn', (_fn, url) => /node_modules\/(knex|tarn)\//.test(url)],
  // The benchmark's statement counter wraps the driver's native calls: their time shows as its own.
  [
    'sqlite3 (JS side and native calls)',
    (_fn, url) => url.includes('node_modules/sqlite3/') || url.endsWith('/dist/bench/counting.js'),
  ],
  ['leasehold code', (_fn, url) => /\/dist\/(queue|receiver|gateway|worker|platform)\//.test(url)],
  [
    'node:http and streams',
    (_fn, url) =>
      /^node:(_http|http|net|stream|internal\/streams|internal\/http|events|internal\/stream_base)/.test(url),
  ],
  ['node: other', (_fn, url) => url.startsWith('node:')],
  ['native bindings, V8', (_fn, url) => url === ''],
  ['other', () => true],
];

/**
 * Which process a profile came from. Every service starts through the same CLI, which loads
 * every command's modules, so it is told by where its own code spent time: the queue's store,
 * the gateway, the receiver, or the worker.
 */
function processOf(profile: CpuProfile, selfMsByUrl: Map<string, number>): string {
  const spent = (pattern: RegExp) =>
    [...selfMsByUrl].filter(([url]) => pattern.test(url)).reduce((sum, [, ms]) => sum + ms, 0);
  const loaded = (suffix: string) => profile.nodes.some((n) => n.callFrame.url.endsWith(suffix));
  if (loaded('/dist/bench/worker.js')) return 'minimal bench worker';
  const scores: [string, number][] = [
    ['queue', spent(/\/dist\/queue\/(app|knex-store|sqlite-store|postgres-store|schemas|long-poll)\.js$/)],
    ['gateway', spent(/\/dist\/gateway\//)],
    ['receiver', spent(/\/dist\/receiver\/(app|knex-store|sqlite-store|postgres-store|middleware)\.js$/)],
    ['leasehold worker', spent(/\/dist\/worker\//)],
  ];
  const [role] = scores.reduce((best, next) => (next[1] > best[1] ? next : best));
  return loaded('/dist/bench/bare-front.js') ? `bare ${role} front` : role;
}

const MODULE_LOADING = /^node:internal\/(modules|bootstrap|deps\/cjs-module-lexer)/;

/** Sample ids taken while loading a module (a module-loading frame anywhere on the stack): start-up. */
function loadingSamples(profile: CpuProfile): (id: number) => boolean {
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const loading = new Map<number, boolean>();
  const isLoading = (id: number): boolean => {
    const known = loading.get(id);
    if (known !== undefined) return known;
    const up = parent.get(id);
    const value = MODULE_LOADING.test(byId.get(id)!.callFrame.url) || (up !== undefined && isLoading(up));
    loading.set(id, value);
    return value;
  };
  return isLoading;
}

/** Self time of each frame, ms, and the time spent loading modules. */
function selfMsOf(profile: CpuProfile): { self: Map<ProfileNode, number>; startupMs: number } {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const isLoading = loadingSamples(profile);
  const self = new Map<ProfileNode, number>();
  let startupMs = 0;
  profile.samples.forEach((id, i) => {
    const ms = (profile.timeDeltas[i] ?? 0) / 1000;
    if (isLoading(id)) {
      startupMs += ms;
      return;
    }
    const node = byId.get(id)!;
    self.set(node, (self.get(node) ?? 0) + ms);
  });
  return { self, startupMs };
}

export function layersOf(self: Map<ProfileNode, number>): Map<string, number> {
  const layers = new Map<string, number>();
  for (const [node, ms] of self) {
    const frame = node.callFrame;
    const layer = LAYERS.find(([, match]) => match(frame.functionName, frame.url))![0];
    layers.set(layer, (layers.get(layer) ?? 0) + ms);
  }
  return layers;
}

/** The names the benchmark gave its children, by pid, where it noted them. */
function processNames(dir: string): Map<number, string> {
  const names = new Map<number, string>();
  let text = '';
  try {
    text = readFileSync(join(dir, PROCESS_NAMES_FILE), 'utf8');
  } catch {
    return names;
  }
  for (const line of text.split('\n').filter(Boolean)) {
    const { pid, name } = JSON.parse(line) as { pid: number; name: string };
    names.set(pid, name);
  }
  return names;
}

function main(dir: string | undefined): void {
  if (!dir || dir === '--help' || dir === '-h') {
    process.stdout.write(
      'usage: node dist/bench/cpu-profiles.js DIR   (DIR: where --cpu-prof-dir wrote the .cpuprofile files)\n',
    );
    process.exit(dir ? 0 : 2);
  }
  const names = LAYERS.map(([name]) => name).filter((name) => name !== 'idle');
  const rows: string[][] = [];
  const named = processNames(dir);
  for (const file of readdirSync(dir)
    .filter((f) => f.endsWith('.cpuprofile'))
    .sort()) {
    const profile = JSON.parse(readFileSync(join(dir, file), 'utf8')) as CpuProfile;
    const { self, startupMs } = selfMsOf(profile);
    const layers = layersOf(self);
    const byUrl = new Map<string, number>();
    for (const [node, ms] of self) byUrl.set(node.callFrame.url, (byUrl.get(node.callFrame.url) ?? 0) + ms);
    const busy = names.reduce((sum, name) => sum + (layers.get(name) ?? 0), 0);
    if (busy < 200) continue; // npm, tsc and short-lived helpers
    const share = (name: string) => `${(((layers.get(name) ?? 0) / busy) * 100).toFixed(0)}%`;
    const seconds = (ms: number) => (ms / 1000).toFixed(1);
    // Node names each profile CPU.<date>.<time>.<pid>.<thread>.<seq>.cpuprofile.
    const pid = Number(file.split('.')[3]);
    rows.push([
      named.get(pid) ?? processOf(profile, byUrl),
      seconds((profile.endTime - profile.startTime) / 1000),
      seconds(startupMs),
      seconds(busy),
      ...names.map(share),
    ]);
  }
  process.stdout.write(
    "CPU by layer: share of each process's busy time (neither idle nor loading modules), from each frame's self time:\n" +
      table(['process', 'wall s', 'loading modules s', 'busy s', ...names], rows) +
      '\n',
  );
}

main(process.argv[2]);
