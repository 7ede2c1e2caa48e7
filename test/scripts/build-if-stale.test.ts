// scripts/build-if-stale.mjs decides from file times alone whether dist/ must be built again,
// and removes outputs whose sources are gone; here on a small tree of its own.
import { mkdirSync, utimesSync, writeFileSync, existsSync, rmSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { expect, test } from 'vitest';
import { markBinsExecutable, pruneOrphans, staleReason } from '../../scripts/build-if-stale.mjs';
import { tempDir } from '../helpers/tmp.js';

/** A tree with sources in queue/ and cli/, built at `builtAt` (seconds), sources written at 100. */
function tree(builtAt = 200) {
  const root = tempDir('leasehold-stale-');
  const write = (path: string, at: number, text = '') => {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
    utimesSync(join(root, path), at, at);
  };
  write('tsconfig.build.json', 100, JSON.stringify({ include: ['queue', 'cli'] }));
  write('tsconfig.json', 100, '{}');
  for (const source of ['queue/app', 'queue/migrations/001_jobs', 'cli/leasehold']) {
    write(`${source}.ts`, 100);
    for (const ext of ['.js', '.d.ts', '.js.map']) write(`dist/${source}${ext}`, builtAt);
  }
  write('queue/types.d.ts', 100);
  return { root, write };
}

test('current when every output is newer than its source and the tsconfigs', () => {
  const { root } = tree();
  expect(staleReason(root)).toBeUndefined();
});

test('stale when a source changed, an output is missing, or a tsconfig changed', () => {
  const changed = tree();
  changed.write('queue/migrations/001_jobs.ts', 300);
  expect(staleReason(changed.root)).toBe(`${join('queue', 'migrations', '001_jobs')}.ts changed since it was built`);

  const added = tree();
  added.write('cli/extra.ts', 150);
  expect(staleReason(added.root)).toBe(`dist/${join('cli', 'extra')}.js is missing`);

  const configured = tree();
  configured.write('tsconfig.json', 300, '{}');
  expect(staleReason(configured.root)).toBe('tsconfig.json changed since the last build');

  expect(staleReason(tree(50).root)).toMatch(/changed since it was built$/);
});

test('outputs whose source is gone are removed; the rest stay', () => {
  const { root, write } = tree();
  write('dist/queue/worker/old.js', 200);
  write('dist/queue/worker/old.js.map', 200);
  write('dist/queue/worker/old.d.ts', 200);
  write('dist/notes.txt', 200);
  expect(pruneOrphans(root).sort()).toEqual([
    'dist/queue/worker/old.d.ts',
    'dist/queue/worker/old.js',
    'dist/queue/worker/old.js.map',
  ]);
  expect(existsSync(join(root, 'dist/queue/app.js'))).toBe(true);
  expect(existsSync(join(root, 'dist/notes.txt'))).toBe(true);
  rmSync(join(root, 'queue/app.ts'));
  expect(pruneOrphans(root).sort()).toEqual(['dist/queue/app.d.ts', 'dist/queue/app.js', 'dist/queue/app.js.map']);
  expect(staleReason(root)).toBeUndefined();
});

test("the package's bin files are made executable: tsc writes them 0644 and npm marks them only at install", () => {
  const { root, write } = tree();
  write('package.json', 100, JSON.stringify({ bin: { leasehold: 'dist/cli/leasehold.js', gone: 'dist/cli/gone.js' } }));
  expect(statSync(join(root, 'dist/cli/leasehold.js')).mode & 0o111).toBe(0);
  expect(markBinsExecutable(root)).toEqual([join('dist', 'cli', 'leasehold.js')]);
  expect((statSync(join(root, 'dist/cli/leasehold.js')).mode & 0o777).toString(8)).toBe('755');
});
