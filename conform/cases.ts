// The conformance cases: each a short exchange with a live downstream on job ids of its own, and
// what the fencing protocol (docs/downstream-protocol.md) says it must answer. A downstream has
// no standard read API, so "nothing was recorded" is checked through the answers to later
// requests: a refused request must leave the next valid one to be the first.
import { NoAnswer, type Answer, type Attempt, type Peer } from './peer.js';

export interface CaseContext {
  peer: Peer;
  /** A job id no earlier run used: `<run>-<name>`. */
  job(name: string): string;
  /** How many identical requests race in the race case. */
  races: number;
  /** Whether requests are signed (a secret was given). */
  signed: boolean;
}

export interface Case {
  name: string;
  /** Run only with a secret: the signature cases. */
  signed?: boolean;
  run(ctx: CaseContext): Promise<void>;
}

/** A case's failure: what the protocol asks beside what the downstream did. */
export class CaseFailure extends Error {
  override readonly name = 'CaseFailure';
}

/** Thrown by a case of an optional extension the downstream does not offer: skipped, saying why. */
export class CaseSkipped extends Error {
  override readonly name = 'CaseSkipped';
}

type Expected =
  { status: 201; outcome: 'applied' } | { status: 200; outcome: 'duplicate' } | { status: number; code?: string };

/** A value as JSON, cut to its first 80 characters: a broken downstream may answer anything. */
export function excerpt(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length <= 80 ? text : `${text.slice(0, 80)}… (${text.length} characters)`;
}

/** An answer as the end of "expected …, got …": its status, then its outcome or error code, or what its body lacks. */
export function describe(answer: Answer): string {
  const { status, body } = answer;
  if (body === undefined) return `${status} with an empty body`;
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    return `${status} with a body that is not a JSON object: ${excerpt(body)}`;
  }
  const { outcome, effect, error } = body as { outcome?: unknown; effect?: unknown; error?: { code?: unknown } };
  if (typeof outcome === 'string') {
    return typeof effect === 'object' && effect !== null
      ? `${status} ${outcome}`
      : `${status} ${outcome} without an effect`;
  }
  if (typeof error?.code === 'string') return `${status} ${error.code}`;
  return `${status} with neither an outcome nor an error code: ${excerpt(body)}`;
}

/**
 * `request`'s answer; when none came (no connection, no answer, not HTTP), the case fails saying
 * `step: expected <expected>, got <what came>`.
 */
export async function answered(step: string, expected: string, request: Promise<Answer>): Promise<Answer> {
  try {
    return await request;
  } catch (err) {
    if (err instanceof NoAnswer) throw new CaseFailure(`${step}: expected ${expected}, got ${err.message}`);
    throw err;
  }
}

function describeExpected(expected: Expected): string {
  if ('outcome' in expected) return `${expected.status} ${expected.outcome}`;
  return `${expected.status}${expected.code ? ` ${expected.code}` : ''}`;
}

/** Checks status and outcome (or error code) together; `step` says which request of the case it was. */
export async function expectAnswer(
  ctx: CaseContext,
  step: string,
  attempt: Attempt,
  expected: Expected,
): Promise<Answer> {
  const answer = await answered(step, describeExpected(expected), ctx.peer.post(attempt));
  const body = answer.body as { outcome?: unknown; effect?: unknown; error?: { code?: unknown } } | undefined;
  const ok =
    answer.status === expected.status &&
    ('outcome' in expected
      ? body?.outcome === expected.outcome && typeof body.effect === 'object' && body.effect !== null
      : expected.code === undefined || body?.error?.code === expected.code);
  if (!ok) throw new CaseFailure(`${step}: expected ${describeExpected(expected)}, got ${describe(answer)}`);
  return answer;
}

/** `2 × 201 applied, 14 × 200 duplicate`, in the order first seen. */
function tally(answers: readonly string[]): string {
  const counts = new Map<string, number>();
  for (const answer of answers) counts.set(answer, (counts.get(answer) ?? 0) + 1);
  return [...counts].map(([answer, n]) => `${n} × ${answer}`).join(', ');
}

export const applied = { status: 201, outcome: 'applied' } as const;
export const duplicate = { status: 200, outcome: 'duplicate' } as const;
const fenced = { status: 409, code: 'fenced' } as const;
const conflict = { status: 422, code: 'conflict' } as const;

function effectOf(answer: Answer): Record<string, unknown> {
  return ((answer.body as { effect?: Record<string, unknown> }).effect ?? {}) as Record<string, unknown>;
}

function expectField(step: string, what: string, actual: unknown, expected: unknown): void {
  if (JSON.stringify(actual) !== JSON.stringify(expected)) {
    throw new CaseFailure(`${step}: expected ${what} ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`);
  }
}

/** Bad inputs, each a request the protocol refuses with 400, on a job of its own. */
const BAD_INPUTS: ReadonlyArray<{ what: string; attempt: (jobId: string) => Attempt }> = [
  { what: 'no jobId', attempt: () => ({ token: 1, body: { qty: 1 } }) },
  { what: 'an empty jobId', attempt: () => ({ token: 1, body: { jobId: '', qty: 1 } }) },
  { what: 'qty 0', attempt: (jobId) => ({ token: 1, body: { jobId, qty: 0 } }) },
  { what: 'qty as a string', attempt: (jobId) => ({ token: 1, body: { jobId, qty: '2' } }) },
  { what: 'a fractional qty', attempt: (jobId) => ({ token: 1, body: { jobId, qty: 1.5 } }) },
  { what: 'neither qty nor body', attempt: (jobId) => ({ token: 1, body: { jobId, key: 'k' } }) },
  { what: 'an empty key', attempt: (jobId) => ({ token: 1, body: { jobId, key: '', qty: 1 } }) },
  {
    what: 'a key of 129 characters',
    attempt: (jobId) => ({ token: 1, body: { jobId, key: 'k'.repeat(129), qty: 1 } }),
  },
  {
    what: 'a body over 64 KiB',
    attempt: (jobId) => ({ token: 1, body: { jobId, key: 'k', body: 'x'.repeat(64 * 1024) } }),
  },
  { what: 'an unknown field', attempt: (jobId) => ({ token: 1, body: { jobId, qty: 1, qtty: 1 } }) },
  { what: 'a body that is not JSON', attempt: () => ({ token: 1, body: '{"jobId": ', raw: true }) },
  { what: 'no Fencing-Token', attempt: (jobId) => ({ body: { jobId, qty: 1 } }) },
  { what: 'Fencing-Token 0', attempt: (jobId) => ({ token: 0, body: { jobId, qty: 1 } }) },
  { what: 'Fencing-Token "abc"', attempt: (jobId) => ({ token: 'abc', body: { jobId, qty: 1 } }) },
];

/** Signatures a downstream with a secret must refuse with 401. */
const BAD_SIGNATURES = [
  ['unsigned is 401', 'unsigned'],
  ['forged is 401', 'forged'],
  ["another route's signature is 401", 'other-route'],
  ['v1 is 401', 'v1'],
] as const;

export const CASES: readonly Case[] = [
  {
    name: 'applied, then duplicate with nothing added',
    async run(ctx) {
      const jobId = ctx.job('applied');
      const first = await expectAnswer(ctx, 'first request', { token: 1, body: { jobId, qty: 2 } }, applied);
      const again = await expectAnswer(ctx, 'the same again', { token: 1, body: { jobId, qty: 2 } }, duplicate);
      expectField('the same again', 'Idempotent-Replayed', again.headers['idempotent-replayed'], 'true');
      expectField('the same again', 'the recorded effect', effectOf(again), effectOf(first));
      // Had the duplicate added anything, a changed qty would be compared with something else.
      const changed = await expectAnswer(ctx, 'then qty 3', { token: 1, body: { jobId, qty: 3 } }, conflict);
      const recorded = (changed.body as { error?: { effect?: { qty?: unknown } } }).error?.effect?.qty;
      expectField('then qty 3', 'the recorded qty', recorded, 2);
    },
  },
  {
    name: 'a keyed effect with a body: applied, then duplicate whatever the key order',
    async run(ctx) {
      const jobId = ctx.job('keyed');
      const body = { amount: 1250, currency: 'EUR', lines: [{ sku: 'a', n: 1 }] };
      await expectAnswer(ctx, 'first request', { token: 1, body: { jobId, key: 'charge', body } }, applied);
      const reordered = { lines: [{ n: 1, sku: 'a' }], currency: 'EUR', amount: 1250 };
      await expectAnswer(
        ctx,
        'the same body, keys reordered',
        { token: 1, body: { jobId, key: 'charge', body: reordered } },
        duplicate,
      );
      await expectAnswer(ctx, 'another key of the job', { token: 1, body: { jobId, key: 'receipt', body } }, applied);
    },
  },
  {
    name: 'a higher token repeats as a duplicate, answered with the effect as first recorded',
    async run(ctx) {
      const jobId = ctx.job('higher');
      const first = await expectAnswer(ctx, 'token 1', { token: 1, body: { jobId, qty: 1 } }, applied);
      const again = await expectAnswer(
        ctx,
        'token 2, the same effect',
        { token: 2, body: { jobId, qty: 1 } },
        duplicate,
      );
      // Its token and time are the first request's: the repeat recorded nothing of its own.
      expectField('token 2, the same effect', 'the effect as first recorded', effectOf(again), effectOf(first));
      await expectAnswer(ctx, 'token 1 after token 2', { token: 1, body: { jobId, qty: 1 } }, fenced);
    },
  },
  {
    name: 'a lower token is fenced on the same key',
    async run(ctx) {
      const jobId = ctx.job('fenced-same');
      await expectAnswer(ctx, 'token 5', { token: 5, body: { jobId, key: 'a', qty: 1 } }, applied);
      const refused = await expectAnswer(
        ctx,
        'token 4, same key',
        { token: 4, body: { jobId, key: 'a', qty: 1 } },
        fenced,
      );
      const highest = (refused.body as { error?: { highestToken?: unknown } }).error?.highestToken;
      expectField('token 4, same key', 'highestToken', highest, 5);
    },
  },
  {
    name: 'a lower token is fenced on another key of the same job',
    async run(ctx) {
      const jobId = ctx.job('fenced-other');
      await expectAnswer(ctx, 'token 5, key a', { token: 5, body: { jobId, key: 'a', qty: 1 } }, applied);
      await expectAnswer(ctx, 'token 4, key b', { token: 4, body: { jobId, key: 'b', qty: 1 } }, fenced);
      await expectAnswer(ctx, 'token 4, the default effect', { token: 4, body: { jobId, qty: 1 } }, fenced);
      // The fenced requests recorded nothing: key b is still new to the current holder.
      await expectAnswer(ctx, 'token 5, key b', { token: 5, body: { jobId, key: 'b', qty: 2 } }, applied);
    },
  },
  {
    name: 'a lower token is fenced before its effect is compared: fenced, not a conflict',
    async run(ctx) {
      const jobId = ctx.job('fenced-first');
      await expectAnswer(ctx, 'token 5, key a', { token: 5, body: { jobId, key: 'a', qty: 1 } }, applied);
      await expectAnswer(ctx, 'token 4, key a, another qty', { token: 4, body: { jobId, key: 'a', qty: 2 } }, fenced);
      await expectAnswer(
        ctx,
        'token 4, key a, a body instead',
        { token: 4, body: { jobId, key: 'a', body: { changed: true } } },
        fenced,
      );
    },
  },
  {
    name: 'a conflict raises no token',
    async run(ctx) {
      const jobId = ctx.job('conflict-token');
      await expectAnswer(ctx, 'token 1, key a', { token: 1, body: { jobId, key: 'a', qty: 1 } }, applied);
      await expectAnswer(ctx, 'token 5, key a, another qty', { token: 5, body: { jobId, key: 'a', qty: 2 } }, conflict);
      // Had the conflict raised the job's token to 5, token 3 would be fenced.
      await expectAnswer(ctx, 'token 3, key b', { token: 3, body: { jobId, key: 'b', qty: 1 } }, applied);
      await expectAnswer(ctx, 'token 2, key a', { token: 2, body: { jobId, key: 'a', qty: 1 } }, fenced);
    },
  },
  {
    name: 'a changed qty is a conflict',
    async run(ctx) {
      const jobId = ctx.job('qty');
      await expectAnswer(ctx, 'qty 2', { token: 1, body: { jobId, key: 'k', qty: 2 } }, applied);
      await expectAnswer(ctx, 'qty 3', { token: 1, body: { jobId, key: 'k', qty: 3 } }, conflict);
      await expectAnswer(ctx, 'no qty, a body', { token: 1, body: { jobId, key: 'k', body: {} } }, conflict);
    },
  },
  {
    name: 'a changed body is a conflict',
    async run(ctx) {
      const jobId = ctx.job('body');
      await expectAnswer(ctx, 'body {a: 1}', { token: 1, body: { jobId, key: 'k', body: { a: 1 } } }, applied);
      const changed = await expectAnswer(
        ctx,
        'body {a: 2}',
        { token: 1, body: { jobId, key: 'k', body: { a: 2 } } },
        conflict,
      );
      const recorded = (changed.body as { error?: { effect?: { body?: unknown } } }).error?.effect?.body;
      expectField('body {a: 2}', 'the recorded body', recorded, { a: 1 });
      await expectAnswer(
        ctx,
        'body {a: 1, b: null}',
        { token: 1, body: { jobId, key: 'k', body: { a: 1, b: null } } },
        conflict,
      );
    },
  },
  {
    name: 'racing identical requests give exactly one applied',
    async run(ctx) {
      const jobId = ctx.job('race');
      const attempt = { token: 1, body: { jobId, qty: 1 } };
      // A request that got no answer counts as neither, and is tallied as what came instead.
      const answers = await Promise.all(
        Array.from({ length: ctx.races }, () =>
          ctx.peer.post(attempt).then(
            (answer) => ({ status: answer.status, said: describe(answer) }),
            (err: unknown) => {
              if (err instanceof NoAnswer) return { status: undefined, said: err.message };
              throw err;
            },
          ),
        ),
      );
      const count = (status: number) => answers.filter((a) => a.status === status).length;
      const [created, repeated] = [count(201), count(200)];
      if (created !== 1 || repeated !== ctx.races - 1) {
        throw new CaseFailure(
          `${ctx.races} racing requests: expected 1 × 201 applied and ${ctx.races - 1} × 200 duplicate, got ${tally(answers.map((a) => a.said))}`,
        );
      }
    },
  },
  {
    name: 'bad input is 400 with nothing recorded',
    async run(ctx) {
      for (const [i, bad] of BAD_INPUTS.entries()) {
        const jobId = ctx.job(`bad-${i}`);
        await expectAnswer(ctx, bad.what, bad.attempt(jobId), { status: 400 });
      }
      // Each refused request left its job untouched: the first valid one is applied, token 1 is not fenced.
      const jobId = ctx.job('bad-then-good');
      await expectAnswer(ctx, 'qty 0 with token 9', { token: 9, body: { jobId, qty: 0 } }, { status: 400 });
      await expectAnswer(ctx, 'then a valid request with token 1', { token: 1, body: { jobId, qty: 1 } }, applied);
      for (const [i, bad] of BAD_INPUTS.entries()) {
        const attempt = bad.attempt(ctx.job(`bad-${i}`));
        const body = attempt.body as { jobId?: unknown } | string;
        if (typeof body !== 'object' || typeof body.jobId !== 'string' || body.jobId === '') continue;
        await expectAnswer(
          ctx,
          `after ${bad.what}, a valid request`,
          { token: 1, body: { jobId: body.jobId, key: 'k', qty: 7 } },
          applied,
        );
      }
    },
  },
  ...BAD_SIGNATURES.map(([name, signing]): Case => ({
    name,
    signed: true,
    async run(ctx) {
      const jobId = ctx.job(`signature-${signing}`);
      await expectAnswer(ctx, signing, { token: 3, body: { jobId, qty: 1 }, signing }, { status: 401 });
      // The refused request recorded nothing and raised no token: token 1, properly signed, is the first.
      await expectAnswer(ctx, 'then signed, token 1', { token: 1, body: { jobId, qty: 1 } }, applied);
    },
  })),
];
