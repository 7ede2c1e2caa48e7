// Lint: typescript-eslint's recommended rules, and the boundary between the parts: a part
// imports another only through its public face, and platform/ imports no service.
import fs from 'node:fs';
import path from 'node:path';
import js from '@eslint/js';
import { defineConfig } from 'eslint/config';
import globals from 'globals';
import tseslint from 'typescript-eslint';

const root = import.meta.dirname;

// Every top-level folder that ships code; test/ is none of them, so tests may reach anything.
const SOURCE_FOLDERS = [
  'platform',
  'queue',
  'receiver',
  'gateway',
  'worker',
  'demo',
  'bench',
  'cli',
  'audit',
  'conform',
  'testing',
];
// What a part shows the others. receiver/signature.ts is the signing scheme the gateway shares.
const PUBLIC_FACES = ['index.ts', 'client.ts', 'types.ts'];
const SHARED_FILES = ['receiver/signature.ts'];

/** The top-level folder a repository-relative path sits in, or undefined outside any part. */
function partOf(relative) {
  const [first, ...rest] = relative.split('/');
  return rest.length > 0 && SOURCE_FOLDERS.includes(first) ? first : undefined;
}

function facesOf(folder) {
  const files = [
    ...PUBLIC_FACES.map((name) => `${folder}/${name}`),
    ...SHARED_FILES.filter((f) => f.startsWith(`${folder}/`)),
  ];
  const present = files.filter((file) => fs.existsSync(path.join(root, file)));
  const named = present.length > 0 ? present : files;
  return named.length === 1 ? named[0] : `${named.slice(0, -1).join(', ')} or ${named.at(-1)}`;
}

// A `*` for the folder of an allowed path stands for every part: `*/main.ts` is each part's main.
function matches(pattern, relative) {
  const [folder, ...file] = pattern.split('/');
  const [actualFolder, ...rest] = relative.split('/');
  return (folder === '*' || folder === actualFolder) && rest.join('/') === file.join('/');
}

const boundaries = {
  meta: {
    type: 'problem',
    docs: { description: 'A part imports another part only through its public face; platform/ imports no part.' },
    schema: [
      {
        type: 'object',
        properties: { allow: { type: 'object', additionalProperties: { type: 'array', items: { type: 'string' } } } },
        additionalProperties: false,
      },
    ],
    messages: {
      internals:
        "{{importer}}/ reaches into {{folder}}/'s internals ({{target}}): import it from {{folder}}/'s public face instead ({{faces}}).",
      platform:
        '{{importer}}/ is the floor the services stand on and imports none of them, but this imports {{target}}: move what it needs into platform/, or have the service pass it in.',
    },
  },
  create(context) {
    const importerPath = path.relative(root, context.filename).split(path.sep).join('/');
    const importer = partOf(importerPath);
    if (!importer) return {};
    const allowed = context.options[0]?.allow?.[importer] ?? [];

    function check(node, specifier) {
      if (typeof specifier !== 'string' || !specifier.startsWith('.')) return;
      const resolved = path.relative(root, path.resolve(path.dirname(context.filename), specifier));
      const target = resolved
        .split(path.sep)
        .join('/')
        .replace(/\.(m?js)$/, '.ts');
      const folder = partOf(target);
      if (!folder || folder === importer || folder === 'platform') return;
      if (importer === 'platform') {
        context.report({ node, messageId: 'platform', data: { importer, target } });
        return;
      }
      const inFolder = target.slice(folder.length + 1);
      if (PUBLIC_FACES.includes(inFolder) || SHARED_FILES.includes(target)) return;
      if (allowed.some((pattern) => matches(pattern, target))) return;
      context.report({ node, messageId: 'internals', data: { importer, folder, target, faces: facesOf(folder) } });
    }

    const fromSource = (node) => check(node.source, node.source?.value);
    return {
      ImportDeclaration: fromSource,
      ExportNamedDeclaration: fromSource,
      ExportAllDeclaration: fromSource,
      ImportExpression: (node) => check(node.source, node.source.type === 'Literal' ? node.source.value : undefined),
      TSImportType: (node) => check(node.argument, node.argument.literal?.value ?? node.argument.value),
    };
  },
};

export default defineConfig(
  { ignores: ['dist/', 'node_modules/', '.bench/', 'data/', 'coverage/'] },
  js.configs.recommended,
  tseslint.configs.recommended,
  {
    languageOptions: { globals: { ...globals.node } },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      // `_name` marks what a signature or a destructuring needs but the code does not use.
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      // A `let` declared before the closures that read it and assigned once later cannot be a const.
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
    },
  },
  {
    files: ['**/*.ts', '**/*.js', '**/*.mjs'],
    plugins: { leasehold: { rules: { boundaries } } },
    rules: {
      'leasehold/boundaries': [
        'error',
        {
          allow: {
            // The one command registers every part's subcommand.
            cli: ['*/main.ts'],
            // The profile runs the queue's own statements on a bare driver: its one entry point into
            // the queue's internals, documented and tested (queue/sql/index.ts).
            bench: ['queue/sql/index.ts'],
            // The test kit makes its workers as createWorker does, under its own name
            // (workerMadeBy), so an error in their options names system.worker.
            testing: ['worker/worker.ts'],
          },
        },
      ],
    },
  },
);
