// The examples of README.md and docs/*.md as the docs-examples test runs them: the fenced blocks
// of each page in order, each with the marker comment before it, and what a line's trailing
// comment says its answer is, checked against the answer it got.
import { isDeepStrictEqual } from 'node:util';

export interface Block {
  lang: string;
  code: string;
  /** `<!-- not run: <reason> -->` before the fence. */
  notRun?: string;
  /** `<!-- example: <file> -->` before the fence: a whole file, run as written. */
  example?: string;
  line: number;
}

/** The fenced blocks of a markdown page, in order. */
export function fencedBlocks(markdown: string): Block[] {
  const blocks: Block[] = [];
  const lines = markdown.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\w*)\s*$/.exec(lines[i]!);
    if (!open) continue;
    const end = lines.findIndex((line, j) => j > i && line.startsWith('```'));
    const marker = /^<!-- (not run|example): (.+?) -->$/.exec(lines[i - 1] ?? '');
    blocks.push({
      lang: open[1]!,
      code: lines.slice(i + 1, end).join('\n'),
      line: i + 1,
      ...(marker?.[1] === 'not run' ? { notRun: marker[2]! } : {}),
      ...(marker?.[1] === 'example' ? { example: marker[2]! } : {}),
    });
    i = end;
  }
  return blocks;
}

/** A shell command and what its trailing comment expects (`curl ... # 201 {job}`). */
export interface Command {
  command: string;
  expected: string;
}

/** The commands of a shell block: continuation lines joined, comment-only and blank lines left out. */
export function shellCommands(code: string): Command[] {
  return code
    .replace(/\\\n\s*/g, ' ')
    .split('\n')
    .filter((line) => line.trim() !== '' && !line.trim().startsWith('#'))
    .map((line) => {
      const [command, expected] = line.split(/\s+#\s+/, 2);
      return { command: command!.trim(), expected: (expected ?? '').trim() };
    });
}

/** The first `{...}` of a comment, brackets balanced, and where it ends. */
function braceGroup(text: string, from: number): { group: string; end: number } | undefined {
  if (text[from] !== '{' && text[from] !== '[') return undefined;
  let depth = 0;
  for (let i = from; i < text.length; i++) {
    if ('{['.includes(text[i]!)) depth++;
    if ('}]'.includes(text[i]!)) depth--;
    if (depth === 0) return { group: text.slice(from, i + 1), end: i + 1 };
  }
  return undefined;
}

/** Splits `a, b: {c, d}, ...` at its top-level commas. */
function topLevel(inner: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < inner.length; i++) {
    if ('{['.includes(inner[i]!)) depth++;
    if ('}]'.includes(inner[i]!)) depth--;
    if (inner[i] === ',' && depth === 0) {
      parts.push(inner.slice(start, i).trim());
      start = i + 1;
    }
  }
  parts.push(inner.slice(start).trim());
  return parts.filter((part) => part !== '' && part !== '...');
}

/** A JSON literal (`1`, `"applied"`, `true`), or undefined when the text is not one. */
function literal(text: string): { value: unknown } | undefined {
  if (!/^(-?\d+|"[^"]*"|true|false|null)$/.test(text)) return undefined;
  return { value: JSON.parse(text) };
}

/**
 * What a shape like `{lease: {..., token: 1}}` or `{outcome: "applied", effect}` says about a
 * value: each key is there, a literal is equal, a nested shape holds inside, `[...]` is an array.
 */
function shapeProblems(shape: string, actual: unknown, path: string): string[] {
  if (shape.startsWith('[')) return Array.isArray(actual) ? [] : [`${path || 'the body'} is not an array`];
  if (typeof actual !== 'object' || actual === null || Array.isArray(actual))
    return [`${path || 'the body'} is not an object`];
  const problems: string[] = [];
  for (const part of topLevel(shape.slice(1, -1))) {
    const [, key, rest] = /^(\w+)(?::\s*(.+))?$/.exec(part) ?? [];
    if (!key) continue;
    const at = path ? `${path}.${key}` : key;
    if (!(key in actual)) {
      problems.push(`${at} is missing`);
      continue;
    }
    const value = (actual as Record<string, unknown>)[key];
    const expectedLiteral = rest ? literal(rest) : undefined;
    if (expectedLiteral && !isDeepStrictEqual(value, expectedLiteral.value))
      problems.push(`${at} is ${JSON.stringify(value)}, not ${rest}`);
    if (rest && /^[[{]/.test(rest)) problems.push(...shapeProblems(rest, value, at));
  }
  return problems;
}

/** Whether some object inside `value` has `key` equal to `expected`. */
function hasDeep(value: unknown, key: string, expected: unknown): boolean {
  if (typeof value !== 'object' || value === null) return false;
  if (!Array.isArray(value) && key in value && isDeepStrictEqual((value as Record<string, unknown>)[key], expected))
    return true;
  return Object.values(value).some((inner) => hasDeep(inner, key, expected));
}

/**
 * What is wrong with an HTTP answer, judged by the comment of its line; empty when nothing is.
 * The comment may give the status (`201`), then an error's code and words of its message
 * (`409 stale_lease: you already finished this job`), a shape of the body (`{lease: {...,
 * token: 1}}`), and `key: literal` pairs found anywhere in the body (`status: "done"`). A
 * comment that is JSON is the whole body. Without a comment, any status below 400 will do.
 */
export function answerProblems(expected: string, status: number, body: string): string[] {
  const parsed = (() => {
    try {
      return { value: JSON.parse(body) as unknown };
    } catch {
      return undefined;
    }
  })();
  const whole = (() => {
    try {
      return { value: JSON.parse(expected) as unknown };
    } catch {
      return undefined;
    }
  })();
  if (whole && typeof whole.value === 'object') {
    return status === 200 && parsed && isDeepStrictEqual(parsed.value, whole.value)
      ? []
      : [`the answer is ${status} ${body}, not 200 ${expected}`];
  }
  const problems: string[] = [];
  const statusWord = /^(\d{3})\b/.exec(expected);
  if (statusWord && Number(statusWord[1]) !== status) problems.push(`the status is ${status}, not ${statusWord[1]}`);
  if (!statusWord && status >= 400) problems.push(`the status is ${status}`);
  let rest = statusWord ? expected.slice(3).trimStart() : expected;
  const refusal = status >= 400 ? /^([a-z_]+)(?:: ([^,]+))?/.exec(rest) : null;
  if (refusal) {
    const error = (parsed?.value as { error?: { code?: string; message?: string } } | undefined)?.error;
    if (error?.code !== refusal[1]) problems.push(`the error code is ${error?.code}, not ${refusal[1]}`);
    if (refusal[2] && !error?.message?.includes(refusal[2]))
      problems.push(`the message ${JSON.stringify(error?.message)} does not say "${refusal[2]}"`);
    rest = rest.slice(refusal[0].length);
  }
  const group = braceGroup(rest, 0);
  if (group) {
    if (!parsed) problems.push(`the body is not JSON: ${body}`);
    else problems.push(...shapeProblems(group.group, parsed.value, ''));
    rest = rest.slice(group.end);
  }
  for (const [, key, value] of rest.matchAll(/\b(\w+): ("[^"]*"|-?\d+|true|false|null)/g)) {
    if (!hasDeep(parsed?.value, key!, JSON.parse(value!))) problems.push(`no ${key} of ${value} in the body`);
  }
  if (problems.length > 0) problems.push(`body: ${body}`);
  return problems;
}
