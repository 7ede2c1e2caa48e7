// What the workers left in the demo's output folder: each generation (`<job>/<token>`) and the
// output.json its holder wrote there, read once the workers have stopped.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface OutputGeneration {
  /** `<job folder>/<token>`, as a finish records it. */
  path: string;
  /** The parsed output.json, or undefined when the folder has none (or it does not parse). */
  content: { id?: unknown; token?: unknown; owner?: unknown } | undefined;
}

export function readOutputs(root: string): OutputGeneration[] {
  const generations: OutputGeneration[] = [];
  for (const job of list(root)) {
    for (const token of list(join(root, job))) {
      let content: OutputGeneration['content'];
      try {
        content = JSON.parse(
          readFileSync(join(root, job, token, 'output.json'), 'utf8'),
        ) as OutputGeneration['content'];
      } catch {
        content = undefined;
      }
      generations.push({ path: `${job}/${token}`, content });
    }
  }
  return generations;
}

function list(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}
