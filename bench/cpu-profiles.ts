// Where each service's CPU went, from the V8 CPU profiles Node writes with `--cpu-prof`: one
// row per process (told apart by the modules it loaded), its busy time split by layer. Run the
// benchmark with its services profiled, then summarise:
//
//   npm run bench -- --quick --no-profile --cpu-prof-dir .bench/prof
//   node dist/bench/cpu-profiles.js .bench/prof
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { table } from './report.js';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string };
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
  ['startup', (_fn, url) => /^node:internal\/(modules|bootstrap|deps\/cjs-module-lexer)/.test(url)],
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
  ['sqlite3 (JS side)', (_fn, url) => url.includes('node_modules/sqlite3/')],
  ['leasehold code', (_fn, url) => /\/dist\/(queue|receiver|gateway)\//.test(url)],
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
 * the gateway, or the receiver.
 */
function processOf(profile: CpuProfile, selfMsByUrl: Map<string, number>): string {
  const spent = (pattern: RegExp) =>
    [...selfMsByUrl].filter(([url]) => pattern.test(url)).reduce((sum, [, ms]) => sum + ms, 0);
  const scores: [string, number][] = [
    ['queue', spent(/\/dist\/queue\/(app|knex-store|sqlite-store|schemas)\.js$/)],
    ['gateway', spent(/\/dist\/gateway\//)],
    ['receiver', spent(/\/dist\/receiver\//)],
  ];
  const [role] = scores.reduce((best, next) => (next[1] > best[1] ? next : best));
  const bare = profile.nodes.some((n) => n.callFrame.url.endsWith('/dist/bench/bare-front.js'));
  return bare ? `bare ${role} front` : role;
}

function selfMsOf(profile: CpuProfile): Map<ProfileNode, number> {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map<ProfileNode, number>();
  profile.samples.forEach((id, i) => {
    const node = byId.get(id)!;
    self.set(node, (self.get(node) ?? 0) + (profile.timeDeltas[i] ?? 0) / 1000);
  });
  return self;
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

function main(dir: string | undefined): void {
  if (!dir || dir === '--help' || dir === '-h') {
    process.stdout.write(
      'usage: node dist/bench/cpu-profiles.js DIR   (DIR: where --cpu-prof-dir wrote the .cpuprofile files)\n',
    );
    process.exit(dir ? 0 : 2);
  }
  const names = LAYERS.map(([name]) => name).filter((name) => name !== 'idle' && name !== 'startup');
  const rows: string[][] = [];
  for (const file of readdirSync(dir)
    .filter((f) => f.endsWith('.cpuprofile'))
    .sort()) {
    const profile = JSON.parse(readFileSync(join(dir, file), 'utf8')) as CpuProfile;
    const self = selfMsOf(profile);
    const layers = layersOf(self);
    const byUrl = new Map<string, number>();
    for (const [node, ms] of self) byUrl.set(node.callFrame.url, (byUrl.get(node.callFrame.url) ?? 0) + ms);
    const busy = names.reduce((sum, name) => sum + (layers.get(name) ?? 0), 0);
    if (busy < 200) continue; // npm, tsc and short-lived helpers
    const share = (name: string) => `${(((layers.get(name) ?? 0) / busy) * 100).toFixed(0)}%`;
    const seconds = (ms: number) => (ms / 1000).toFixed(1);
    rows.push([
      processOf(profile, byUrl),
      seconds((profile.endTime - profile.startTime) / 1000),
      seconds(layers.get('startup') ?? 0),
      seconds(busy),
      ...names.map(share),
    ]);
  }
  process.stdout.write(
    "CPU by layer: share of each process's busy time (neither idle nor loading modules at startup), from each frame's self time:\n" +
      table(['process', 'wall s', 'startup s', 'busy s', ...names], rows) +
      '\n',
  );
}

main(process.argv[2]);
