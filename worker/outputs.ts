// Generation-scoped outputs: each lease writes under `<root>/<job>/<token>/`, so two holders of
// one job never share a path; the finish records which generation won, and generations that can
// no longer win are removed, judged from the queue's current row — never from a worker's memory.
import { randomUUID } from 'node:crypto';
import { mkdir, readdir, rename, rm } from 'node:fs/promises';
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
 * Entries that are not generations (not a token) are left alone. Safe to run again, anywhere,
 * and at once from several places: each removed generation is reported by one of them.
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
  const orphans = orphanGenerations(job, tokens);
  const removed: number[] = [];
  for (const token of orphans) if (await removeGeneration(folder, token)) removed.push(token);
  // What a cleanup that stopped half-way moved aside is deleted by the next.
  for (const name of names.filter((entry) => entry.startsWith(ASIDE)))
    await rm(join(folder, name), { recursive: true, force: true });
  return { removed, kept: tokens.filter((token) => !orphans.includes(token)) };
}

/** Where a generation is moved before it is deleted: not a token, so never taken for one. */
const ASIDE = '.removing-';

/**
 * Removes one generation's folder, once: it is moved aside first, and a rename is atomic, so of
 * two cleanups racing (the winner's and the stale holder's) exactly one removes it and says so.
 * False when another got there first.
 */
async function removeGeneration(folder: string, token: number): Promise<boolean> {
  const aside = join(folder, `${ASIDE}${token}-${randomUUID()}`);
  try {
    await rename(join(folder, String(token)), aside);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
  await rm(aside, { recursive: true, force: true });
  return true;
}
