// makeDirectory: a folder and its missing parents, one level at a time, as Node's recursive mkdir
// makes them, with Node's own errors. (Under /proc, where Node's recursive mkdir never returns,
// the services are run as processes: test/queue/process.test.ts.)
import { statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { makeDirectory } from '../../platform/directories.js';
import { tempDir } from '../helpers/tmp.js';

test('makes the folder and each missing parent; one that exists is left as it is', () => {
  const root = tempDir('leasehold-dirs-');
  const deep = join(root, 'a', 'b', 'c');
  makeDirectory(deep);
  expect(statSync(deep).isDirectory()).toBe(true);
  makeDirectory(deep);
  makeDirectory(root);
  expect(statSync(deep).isDirectory()).toBe(true);
});

test('a relative path is made from the working folder', () => {
  const root = tempDir('leasehold-dirs-');
  const before = process.cwd();
  process.chdir(root);
  try {
    makeDirectory(join('x', 'y'));
  } finally {
    process.chdir(before);
  }
  expect(statSync(join(root, 'x', 'y')).isDirectory()).toBe(true);
});

test('a file in the way is refused as Node refuses it, naming the path', () => {
  const root = tempDir('leasehold-dirs-');
  const file = join(root, 'file');
  writeFileSync(file, '');
  expect(() => makeDirectory(file)).toThrow(expect.objectContaining({ code: 'EEXIST', path: file }));
  expect(() => makeDirectory(join(file, 'below'))).toThrow(
    expect.objectContaining({ code: 'ENOTDIR', path: join(file, 'below') }),
  );
});
