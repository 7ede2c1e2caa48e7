// The package's version, read from its package.json whether the code runs from the sources
// (under vitest) or from dist/ (built or installed): the nearest package.json named leasehold.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

let version: string | undefined;

export function packageVersion(): string {
  return (version ??= findVersion());
}

function findVersion(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'leasehold' && pkg.version) return pkg.version;
    } catch {
      // No package.json here (or not JSON): look one folder up.
    }
    const parent = dirname(dir);
    if (parent === dir) return '0.0.0';
    dir = parent;
  }
}
