// The package as another project gets it: `npm pack`, then the tarball installed into an empty
// project that has none of this repository's tools, only vitest from the registry. There the
// docs' examples run as written: the vitest file that uses the stub receiver, and the
// fencedEffects server with its own migration (both read from docs/receiver.md), and the test
// kit's zombie as a vitest and a node:test file (docs/testing-kit.md).
import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, posix } from 'node:path';
import { stripVTControlCharacters } from 'node:util';
import knex from 'knex';
import { expect, onTestFinished, test } from 'vitest';
import { ROOT, userEnvironment } from '../helpers/processes.js';
import { tempDir } from '../helpers/tmp.js';

/** The versions the consumer installs, as the README tells a user to. */
const CONSUMER_DEV_DEPENDENCIES = { vite: '8.3.8', vitest: '4.1.12' };

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

function run(command: string, args: string[], cwd: string, timeoutMs: number): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, env: userEnvironment(), stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** The examples a doc marks with `<!-- example: <file> -->`, by file name. */
function docExamples(markdown: string): Map<string, string> {
  const found = new Map<string, string>();
  for (const [, file, code] of markdown.matchAll(/<!-- example: (\S+) -->\n```\w*\n([\s\S]*?)\n```/g)) {
    found.set(file!, `${code}\n`);
  }
  return found;
}

test(
  'npm pack installs into a project without our tools, and the docs examples run there',
  { timeout: 8 * 60_000 },
  async () => {
    const dir = tempDir('leasehold-pack-');
    const timings: string[] = [];
    const step = async (what: string, work: () => Promise<Ran>) => {
      const started = Date.now();
      const result = await work();
      timings.push(`${what}: ${((Date.now() - started) / 1000).toFixed(1)} s`);
      expect(result.code, `${what}\nstdout:\n${result.stdout}\nstderr:\n${result.stderr}`).toBe(0);
      return result;
    };
    onTestFinished(() => console.log(`pack test: ${timings.join(', ')}`));

    // The tarball: built dist/ with types and the command, nothing that runs at install.
    const packed = await step('npm pack', () =>
      run('npm', ['pack', '--json', '--pack-destination', dir], ROOT, 5 * 60_000),
    );
    const [{ filename, files }] = JSON.parse(packed.stdout.slice(packed.stdout.indexOf('['))) as [
      { filename: string; files: Array<{ path: string }> },
    ];
    const paths = files.map((f) => f.path);
    expect(paths).toEqual(
      expect.arrayContaining([
        'package.json',
        'dist/cli/leasehold.js',
        'dist/receiver/index.js',
        'dist/receiver/index.d.ts',
        'LICENSE',
        'CHANGELOG.md',
        'docs/demo-timeline.png', // the README's picture
      ]),
    );
    expect(paths.filter((p) => /\.map$|^dist\/bench\/|(?<!\.d)\.ts$/.test(p))).toEqual([]);
    // Every file a shipped doc links to is shipped beside it (npm always ships the README).
    const shipped = new Set([...paths, 'README.md']);
    const dangling = paths
      .filter((p) => /^docs\/[^/]+\.md$/.test(p))
      .flatMap((doc) =>
        [...readFileSync(join(ROOT, doc), 'utf8').matchAll(/\]\(([^)#\s]+)(?:#[^)]*)?\)/g)]
          .map((link) => link[1]!)
          .filter((target) => !/^[a-z]+:/.test(target))
          .map((target) => ({ doc, target, path: posix.normalize(posix.join(posix.dirname(doc), target)) }))
          .filter(({ path }) => !shipped.has(path))
          .map(({ doc, target }) => `${doc} links to ${target}`),
      );
    expect(dangling, 'links in the shipped docs to files the tarball lacks').toEqual([]);
    const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
      version: string;
      private?: boolean;
      scripts: Record<string, string>;
    };
    expect(manifest.private).toBeUndefined();
    for (const hook of ['preinstall', 'install', 'postinstall', 'prepare'])
      expect(manifest.scripts).not.toHaveProperty(hook);

    // The consumer: an empty project, the tarball and express, and vitest from the registry.
    const project = join(dir, 'consumer');
    mkdirSync(project);
    writeFileSync(
      join(project, 'package.json'),
      JSON.stringify({
        name: 'consumer',
        private: true,
        type: 'module',
        dependencies: { leasehold: `file:${join(dir, filename)}`, express: '5.3.0' },
        devDependencies: CONSUMER_DEV_DEPENDENCIES,
      }),
    );
    // sqlite3 compiles from source where no prebuilt binary fits (two minutes on 2 cores): its
    // install script is skipped, and the binary this repository's own install built is used.
    await step('npm install', () =>
      run('npm', ['install', '--ignore-scripts', '--prefer-offline', '--no-audit', '--no-fund'], project, 4 * 60_000),
    );
    const sqlite = (root: string) => join(root, 'node_modules', 'sqlite3');
    const version = (root: string) =>
      (JSON.parse(readFileSync(join(sqlite(root), 'package.json'), 'utf8')) as { version: string }).version;
    expect(version(project)).toBe(version(ROOT));
    mkdirSync(join(sqlite(project), 'build', 'Release'), { recursive: true });
    copyFileSync(
      join(sqlite(ROOT), 'build', 'Release', 'node_sqlite3.node'),
      join(sqlite(project), 'build', 'Release', 'node_sqlite3.node'),
    );

    const bin = join(project, 'node_modules', '.bin', 'leasehold');
    expect((await step('leasehold --version', () => run(bin, ['--version'], project, 30_000))).stdout.trim()).toBe(
      manifest.version,
    );
    expect(existsSync(join(project, 'node_modules', 'leasehold', 'dist', 'receiver', 'service.d.ts'))).toBe(true);
    // leasehold/conform resolves from the package, and its command is on the bin.
    const conformExport = await step('import leasehold/conform', () =>
      run(
        process.execPath,
        ['--input-type=module', '-e', "const m = await import('leasehold/conform'); console.log(typeof m.conform);"],
        project,
        30_000,
      ),
    );
    expect(conformExport.stdout.trim()).toBe('function');
    expect(
      (await step('leasehold conform --help', () => run(bin, ['conform', '--help'], project, 30_000))).stdout,
    ).toContain('N passed, M failed');

    // The docs' examples, as written: the stub's and the test kit's.
    const examples = new Map([
      ...docExamples(readFileSync(join(ROOT, 'docs', 'receiver.md'), 'utf8')),
      ...docExamples(readFileSync(join(ROOT, 'docs', 'testing-kit.md'), 'utf8')),
    ]);
    // The programs test/system/docs-examples.test.ts leaves to this test (its RUN_BY_THE_PACK_TEST);
    // the pages' other programs it runs itself.
    const packRun = ['effects.test.ts', 'ship.mjs', 'zombie.node-test.mjs', 'zombie.test.ts'];
    expect(
      packRun.filter((file) => !examples.has(file)),
      'examples missing from the docs',
    ).toEqual([]);
    for (const file of packRun) writeFileSync(join(project, file), examples.get(file)!);

    const vitest = await step('vitest run', () =>
      run(process.execPath, [join(project, 'node_modules', 'vitest', 'vitest.mjs'), 'run'], project, 2 * 60_000),
    );
    expect(stripVTControlCharacters(vitest.stdout)).toMatch(/Tests\s+6 passed \(6\)/);
    const nodeTest = await step('node --test', () =>
      run(process.execPath, ['--test', '--test-reporter=tap', 'zombie.node-test.mjs'], project, 60_000),
    );
    expect(nodeTest.stdout).toMatch(/^# pass 2$/m);

    await shipExample(project);
  },
);

/** Runs ship.mjs as a user would (`node ship.mjs`), and ships one order through it. */
async function shipExample(project: string): Promise<void> {
  const child = spawn(process.execPath, ['ship.mjs'], {
    cwd: project,
    env: { ...userEnvironment(), PORT: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  onTestFinished(() => {
    child.kill('SIGKILL');
  });
  let output = '';
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`ship.mjs did not start:\n${output}`)), 30_000);
    const read = (chunk: Buffer) => {
      output += chunk.toString();
      const match = /listening on (http:\/\/\S+)/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]!);
      }
    };
    child.stdout.on('data', read);
    child.stderr.on('data', read);
    child.on('exit', () => reject(new Error(`ship.mjs exited:\n${output}`)));
  });
  const ship = (token: number) =>
    fetch(`${url}/ship`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'Fencing-Token': String(token) },
      body: JSON.stringify({ jobId: 'order-1', qty: 2 }),
    }).then((res) => res.status);
  expect([await ship(1), await ship(1), await ship(2), await ship(1)]).toEqual([201, 200, 200, 409]);
  // As receiver.md says: the example keeps the whole protocol (keys, bodies, races, batches).
  const conformed = await run(
    join(project, 'node_modules', '.bin', 'leasehold'),
    ['conform', `${url}/ship`],
    project,
    60_000,
  );
  expect({ code: conformed.code, last: conformed.stdout.trim().split('\n').at(-1) }, conformed.stdout).toEqual({
    code: 0,
    last: expect.stringMatching(/^\d+ passed, 0 failed$/),
  });
  child.kill('SIGTERM');

  const db = knex({
    client: 'sqlite3',
    connection: { filename: join(project, 'data', 'shipping.sqlite') },
    useNullAsDefault: true,
  });
  try {
    expect(await db('shipments').where({ job_id: 'order-1' }).select('job_id', 'key', 'qty')).toEqual([
      { job_id: 'order-1', key: '', qty: 2 },
    ]);
  } finally {
    await db.destroy();
  }
}
