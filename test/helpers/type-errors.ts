// What TypeScript says of a piece of source, checked as a file beside the tests with the
// project's compiler options and more: for the types a consumer compiles against.
import { join } from 'node:path';
import ts from 'typescript';
import { ROOT } from './processes.js';

/**
 * The type errors of `source`, checked as `test/<folder>/options-probe.ts` (its imports relative to
 * that folder), with the project's options and `options`.
 */
export function typeErrors(source: string, options: ts.CompilerOptions, folder = 'worker'): string[] {
  const file = join(ROOT, 'test', folder, 'options-probe.ts');
  const config = ts.getParsedCommandLineOfConfigFile(
    join(ROOT, 'tsconfig.json'),
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: () => {},
    },
  );
  const compilerOptions = { ...config!.options, ...options, noEmit: true };
  const host = ts.createCompilerHost(compilerOptions);
  const { fileExists, readFile } = host;
  host.fileExists = (name) => name === file || fileExists(name);
  host.readFile = (name) => (name === file ? source : readFile(name));
  const program = ts.createProgram([file], compilerOptions, host);
  return ts
    .getPreEmitDiagnostics(program, program.getSourceFile(file))
    .map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
}
