// Every example of README.md and docs/*.md, run in order against the three services as processes,
// as a reader who follows the README and then each page on one ./data would: each line's
// comment says the answer it gets, and it must get it. Shell blocks run line by line in one
// shell per page; a block marked `<!-- example: <file> -->` is a whole program, run as written
// (TypeScript with its types stripped) from a project that has leasehold installed. A block
// marked `<!-- not run: <reason> -->` is left out, and says where the suite covers it instead.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import { expect, test } from 'vitest';
import { answerProblems, fencedBlocks, shellCommands, type Block } from '../helpers/docs-examples.js';
import { ROOT, startProcess, userEnvironment } from '../helpers/processes.js';
import { tempDir } from '../helpers/tmp.js';

/** curl with `--json` (7.82 and later), or undefined. */
function curlVersion(): string | undefined {
  try {
    const version = /^curl (\d+)\.(\d+)/.exec(execFileSync('curl', ['--version'], { encoding: 'utf8' }));
    return version && (Number(version[1]) > 7 || (Number(version[1]) === 7 && Number(version[2]) >= 82))
      ? version[0]
      : undefined;
  } catch {
    return undefined;
  }
}

/** README.md first, then the pages of docs/ by name. */
const PAGES = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .sort()
    .map((name) => `docs/${name}`),
];

/** The page's examples, in order; blocks of other languages (output, SQL, diagrams) are not examples. */
function examplesOf(page: string): Block[] {
  return fencedBlocks(readFileSync(join(ROOT, page), 'utf8')).filter((block) =>
    ['sh', 'ts', 'js'].includes(block.lang),
  );
}

/** Programs the pack test runs in a project with the tarball, vitest and express installed. */
const RUN_BY_THE_PACK_TEST = new Set([
  'docs/receiver.md:effects.test.ts',
  'docs/receiver.md:ship.mjs',
  'docs/testing-kit.md:zombie.test.ts',
  'docs/testing-kit.md:zombie.node-test.mjs',
]);

interface Step {
  page: string;
  command: string;
  expected: string;
  kind: 'curl' | 'command';
  out: string;
}

test.skipIf(curlVersion() === undefined)(
  "the README's and the docs' examples answer, in order, as their comments say",
  { timeout: 5 * 60_000 },
  async () => {
    const dir = tempDir('leasehold-docs-');
    const quiet = ['--port', '0', '--log-level', 'warn'];
    const [queue, receiver] = await Promise.all([
      startProcess('queue', [...quiet, '--db', join(dir, 'queue.sqlite')]),
      startProcess('receiver', [...quiet, '--db', join(dir, 'receiver.sqlite')]),
    ]);
    const gateway = await startProcess('gateway', [...quiet, '--queue', queue.url, '--receiver', receiver.url]);
    // The docs' ports are the services' defaults; here the services listen where they could.
    const ports: Record<string, string> = { '4100': queue.url, '4200': gateway.url, '4300': receiver.url };
    const here = (text: string) =>
      text.replace(/http:\/\/127\.0\.0\.1:(4[123]00)\b/g, (url, port: string) => ports[port] ?? url);

    // A project that has leasehold installed, as the README's "in another project" makes one:
    // `npx leasehold` and `node_modules/.bin/leasehold` run the built command, `leasehold/...` imports resolve.
    const project = join(dir, 'project');
    mkdirSync(join(project, 'node_modules', '.bin'), { recursive: true });
    writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'reader', private: true, type: 'module' }));
    symlinkSync(ROOT, join(project, 'node_modules', 'leasehold'));
    // The bin runs the built command on the Node.js running this test, so CI's runs on other
    // versions run the examples on that version too.
    writeFileSync(
      join(project, 'node_modules', '.bin', 'leasehold'),
      `#!/bin/sh\nexec "${process.execPath}" "${join(ROOT, 'dist', 'cli', 'leasehold.js')}" "$@"\n`,
      { mode: 0o755 },
    );

    const skipped: string[] = [];
    const typescript: string[] = [];
    const unmarked: string[] = [];
    const steps: Step[] = [];
    const scripts: Array<{ page: string; script: string }> = [];
    for (const page of PAGES) {
      const lines: string[] = [];
      for (const block of examplesOf(page)) {
        const where = `${page}:${block.line}`;
        if (block.notRun) {
          skipped.push(`${where} (${block.notRun})`);
        } else if (block.example) {
          if (RUN_BY_THE_PACK_TEST.has(`${page}:${block.example}`)) continue;
          const file = block.example.replace(/\.ts$/, '.mjs');
          const js = ts.transpileModule(here(block.code), {
            compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
          }).outputText;
          writeFileSync(join(project, file), js);
          if (block.lang === 'ts') {
            writeFileSync(join(project, block.example), block.code);
            typescript.push(join(project, block.example));
          }
          // `console.log(x); // <what it prints>`: the program must print that line.
          const prints = [...block.code.matchAll(/console\.log\(.*\);\s*\/\/ (.+)$/gm)].map((m) => m[1]!);
          const out = join(dir, `step-${steps.length}`);
          steps.push({ page, command: `node ${file}`, expected: prints.join('\n'), kind: 'command', out });
          lines.push(`node ${file} >${out}.stdout 2>${out}.stderr; echo $? >${out}.rc`);
        } else if (block.lang === 'sh') {
          for (const { command, expected } of shellCommands(here(block.code))) {
            if (/&\s*$/.test(command)) {
              unmarked.push(
                `${where}: "${command}" starts something in the background; mark the block <!-- not run: <reason> -->`,
              );
              continue;
            }
            const out = join(dir, `step-${steps.length}`);
            const curl = command.startsWith('curl ');
            steps.push({ page, command, expected, kind: curl ? 'curl' : 'command', out });
            lines.push(
              curl
                ? `${command} -o ${out}.body -w '%{http_code}' >${out}.stdout 2>${out}.stderr; echo $? >${out}.rc`
                : `{ ${command}; } >${out}.stdout 2>${out}.stderr; echo $? >${out}.rc`,
            );
          }
        } else {
          unmarked.push(
            `${where}: a ${block.lang} block with neither <!-- example: <file> --> nor <!-- not run: <reason> -->`,
          );
        }
      }
      if (lines.length > 0) scripts.push({ page, script: lines.join('\n') });
    }
    console.log(`docs examples: ${steps.length} steps run; not run here:\n  ${skipped.join('\n  ')}`);
    expect(unmarked).toEqual([]);
    expect(typeErrors(typescript)).toEqual([]);
    expect(steps.some((s) => s.command.includes('$G/send'))).toBe(true);
    expect(steps.some((s) => s.command.includes('$R/effects'))).toBe(true);
    expect(steps.some((s) => s.command.startsWith('npx leasehold audit'))).toBe(true);

    // Each page in its own shell, one after the other, on the same services.
    // `npx leasehold audit` reads the default ports unless told: the variables of its flags tell it.
    const env = {
      ...userEnvironment(),
      PATH: `${join(project, 'node_modules', '.bin')}:${process.env.PATH}`,
      LEASEHOLD_QUEUE: queue.url,
      LEASEHOLD_RECEIVER: receiver.url,
    };
    for (const { page, script } of scripts) {
      const ran = spawnSync('bash', ['-c', script], { cwd: project, env, encoding: 'utf8', timeout: 3 * 60_000 });
      expect(ran.status, `${page}: the shell failed\n${ran.stderr}`).toBe(0);
    }

    const problems: string[] = [];
    for (const step of steps) {
      const read = (ext: string) => {
        try {
          return readFileSync(`${step.out}.${ext}`, 'utf8');
        } catch {
          return '';
        }
      };
      const rc = read('rc').trim();
      const found =
        step.kind === 'curl'
          ? rc !== '0'
            ? [`curl exited ${rc}: ${read('stderr')}`]
            : answerProblems(step.expected, Number(read('stdout')), read('body'))
          : [
              ...(rc === '0' ? [] : [`exit code ${rc}, not 0; stderr: ${read('stderr')}`]),
              ...step.expected
                .split('\n')
                .filter((line) => line !== '' && !read('stdout').split('\n').includes(line))
                .filter(
                  (line) =>
                    !read('stdout')
                      .split('\n')
                      .some((printed) => printed.startsWith(line)),
                )
                .map((line) => `it did not print "${line}"; stdout: ${read('stdout')}`),
            ];
      if (found.length > 0)
        problems.push(
          `${step.page}: ${step.command}\n    expected: ${step.expected || '(success)'}\n    ${found.join('\n    ')}`,
        );
    }
    expect(problems, problems.join('\n')).toEqual([]);
  },
);

/** The TypeScript programs as a user's project compiles them, against the package's own types. */
function typeErrors(files: string[]): string[] {
  const program = ts.createProgram(files, {
    noEmit: true,
    strict: true,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    skipLibCheck: true,
    types: ['node'],
    typeRoots: [join(ROOT, 'node_modules', '@types')],
  });
  return ts
    .getPreEmitDiagnostics(program)
    .map((d) => `${d.file?.fileName ?? ''}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`);
}
