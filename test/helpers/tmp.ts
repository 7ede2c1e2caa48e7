// Temporary folders that outlive a failing test, so its SQLite files and logs can be inspected.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { onTestFinished } from 'vitest';

/** A fresh folder, removed when the test passes and kept (its path printed) when it fails. */
export function tempDir(prefix = 'leasehold-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  onTestFinished(({ task }) => {
    if (task.result?.state === 'fail') console.error(`kept temp dir of failed test "${task.name}": ${dir}`);
    else rmSync(dir, { recursive: true, force: true });
  });
  return dir;
}
