#!/usr/bin/env node
// Builds dist/ with tsc only when it is stale: an output missing, a source newer than its
// output, or a tsconfig newer than the oldest output. Outputs whose source is gone are removed
// first, so dist/ (and a packed tarball) holds exactly what the sources build to. `npm run
// demo`, `npm start` and `npm pack` run it: tsc takes most of a minute on a small machine.
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const CONFIGS = ['tsconfig.json', 'tsconfig.build.json'];
/** What tsc writes for one source file. */
const OUTPUTS = ['.js', '.d.ts'];
/** Everything tsc may have written for one, maps included: what pruning removes. */
const WRITTEN = ['.js', '.d.ts', '.js.map', '.d.ts.map'];

/** The folders tsconfig.build.json compiles. */
export function sourceFolders(root) {
  return JSON.parse(readFileSync(join(root, 'tsconfig.build.json'), 'utf8')).include;
}

function filesUnder(dir) {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath, entry.name));
}

/** Each source, relative to `root` and without `.ts`: `queue/app`. */
function sources(root) {
  return sourceFolders(root)
    .flatMap((folder) => filesUnder(join(root, folder)))
    .filter((file) => file.endsWith('.ts') && !file.endsWith('.d.ts'))
    .map((file) => relative(root, file).slice(0, -'.ts'.length));
}

/** Why dist/ must be built again, or undefined when it is current. */
export function staleReason(root) {
  let oldest = Infinity;
  for (const source of sources(root)) {
    const sourceTime = statSync(join(root, `${source}.ts`)).mtimeMs;
    for (const ext of OUTPUTS) {
      const output = join(root, 'dist', `${source}${ext}`);
      if (!existsSync(output)) return `dist/${source}${ext} is missing`;
      const outputTime = statSync(output).mtimeMs;
      if (sourceTime > outputTime) return `${source}.ts changed since it was built`;
      oldest = Math.min(oldest, outputTime);
    }
  }
  for (const config of CONFIGS) {
    if (existsSync(join(root, config)) && statSync(join(root, config)).mtimeMs > oldest) {
      return `${config} changed since the last build`;
    }
  }
  return undefined;
}

/**
 * Makes the package's `bin` files executable; returns the ones it marked. tsc writes them 0644, and
 * npm marks a bin only at install time, when a fresh clone has no dist/ yet: without this,
 * `npx leasehold` after `npm ci && npm run build` is "Permission denied".
 */
export function markBinsExecutable(root) {
  const { bin = {} } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
  const files = typeof bin === 'string' ? [bin] : Object.values(bin);
  return files
    .map((file) => join(root, file))
    .filter((file) => existsSync(file))
    .map((file) => {
      chmodSync(file, 0o755);
      return relative(root, file);
    });
}

/** Removes what tsc wrote for sources that no longer exist; returns what was removed. */
export function pruneOrphans(root) {
  const live = new Set(sources(root).map((source) => source.split(sep).join('/')));
  const removed = [];
  for (const file of filesUnder(join(root, 'dist'))) {
    const path = relative(join(root, 'dist'), file).split(sep).join('/');
    const ext = WRITTEN.find((e) => path.endsWith(e));
    if (ext === undefined || live.has(path.slice(0, -ext.length))) continue;
    rmSync(file);
    removed.push(`dist/${path}`);
  }
  return removed;
}

function main() {
  const root = fileURLToPath(new URL('..', import.meta.url));
  const removed = pruneOrphans(root);
  if (removed.length > 0) console.error(`build-if-stale: removed ${removed.length} outputs whose sources are gone`);
  const reason = staleReason(root);
  if (reason === undefined) {
    console.error('build-if-stale: dist/ is current; not rebuilding');
    markBinsExecutable(root);
    return 0;
  }
  console.error(`build-if-stale: building dist/ (${reason})`);
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  const built = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], { cwd: root, stdio: 'inherit' });
  if (built.status === 0) markBinsExecutable(root);
  return built.status ?? 1;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) process.exit(main());
