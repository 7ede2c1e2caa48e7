// Every test file is in exactly one of vitest's projects (unit, db, http, system), so running the
// layers one by one runs every test once: a new file cannot be left out of all of them unnoticed.
import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { expect, test } from 'vitest';
import { createVitest } from 'vitest/node';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

test('every test/**/*.test.ts file belongs to exactly one project', async () => {
  const files = readdirSync(`${ROOT}test`, { recursive: true, encoding: 'utf8' })
    .map((file) => `test/${file.split('\\').join('/')}`)
    .filter((file) => file.endsWith('.test.ts'))
    .sort();
  expect(files.length).toBeGreaterThan(0);

  const vitest = await createVitest('test', { root: ROOT, config: 'vitest.config.ts', watch: false });
  try {
    const projectsOf = new Map<string, string[]>(files.map((file) => [file, []]));
    for (const spec of await vitest.globTestSpecifications()) {
      const file = spec.moduleId.slice(ROOT.length);
      projectsOf.set(file, [...(projectsOf.get(file) ?? []), spec.project.name]);
    }
    const misplaced = [...projectsOf].filter(([, projects]) => projects.length !== 1);
    expect(misplaced, 'each file with the projects it is in; add it to one layer in vitest.config.ts').toEqual([]);
    expect(vitest.projects.map((project) => project.name).sort()).toEqual(['db', 'http', 'system', 'unit']);
  } finally {
    await vitest.close();
  }
});
