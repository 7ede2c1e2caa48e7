// Generation-scoped outputs: each lease writes under `<root>/<job>/<token>/`, so two holders of
// one job never share a path; the finish records which generation won, and generations that can
// no longer win are removed, judged from the queue's current row — never from a worker's memory.
import { mkdir, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Lease } from '../queue/types.js';
import { generationPath, jobFolderName, orphanGenerations } from './rules.js';
import type { QueueApi } from './types.js';

/** `<root>/<job>/<token>/` for this lease, created when missing; its absolute path. */
export async function outputDir(root: string, lease: Pick<Lease, 'id' | 'token'>): Promise<string> {
  const dir = join(root, generationPath(lease.id, lease.token));
  await mkdir(dir, { recursive: true });
  return dir;
}

export interface Cleanup {
  /** Tokens whose generation was removed. */
  removed: number[];
  /** Tokens whose generation was left: the current holder's or newer, or the recorded winner. */
  kept: number[];
}

/**
 * Removes the generations of `jobId` that can no longer win: below the job's current token and
 * not the one its finish recorded. The row is read first, then the folder listed: a claim
 * racing with this only raises the token, so nothing it creates is ever below the token read.
 * Entries that are not generations (not a token) are left alone. Safe to run again, anywhere.
 */
export async function cleanupOrphans(root: string, jobId: string, queue: Pick<QueueApi, 'get'>): Promise<Cleanup> {
  const job = await queue.get(jobId);
  const folder = join(root, jobFolderName(jobId));
  let names: string[];
  try {
    names = await readdir(folder);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { removed: [], kept: [] };
    throw err;
  }
  const tokens = names
    .filter((name) => /^[1-9]\d{0,15}$/.test(name))
    .map(Number)
    .filter(Number.isSafeInteger)
    .sort((a, b) => a - b);
  const removed = orphanGenerations(job, tokens);
  for (const token of removed) await rm(join(folder, String(token)), { recursive: true, force: true });
  return { removed, kept: tokens.filter((token) => !removed.includes(token)) };
}
