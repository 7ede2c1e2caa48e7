// Making a folder and its missing parents, one level at a time.
import { existsSync, mkdirSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';

/**
 * Makes `dir` and any missing parents, as `mkdirSync(dir, {recursive: true})` does, but one level
 * at a time: Node's own recursive mkdir never returns under /proc (the kernel answers ENOENT for
 * a folder whose parent exists, and Node tries again forever), so `--db /proc/x/q.sqlite` hung a
 * service instead of failing it. An error names the folder that could not be made.
 */
export function makeDirectory(dir: string): void {
  const missing: string[] = [];
  for (let at = resolve(dir); !existsSync(at); at = dirname(at)) {
    missing.unshift(at);
    if (dirname(at) === at) break;
  }
  // A file in the way: Node's own error for it (EEXIST), as the recursive mkdir gave.
  if (missing.length === 0 && !statSync(dir).isDirectory()) mkdirSync(dir);
  for (const folder of missing) {
    try {
      mkdirSync(folder);
    } catch (err) {
      // Made meanwhile by another process: as good as made here.
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || !statSync(folder).isDirectory()) throw err;
    }
  }
}
