// Generation-scoped outputs with the real services: each lease writes under <root>/<job>/<token>/,
// the finish records the winner in the job's result, and generations that can no longer win are
// removed — judged from the queue's row, even while a new claim races with the cleanup.
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { cleanupOrphans, LeaseLostError, type JobContext } from '../../worker/index.js';
import { MAX_RESULT_DEPTH, MAX_RESULT_KEYS } from '../../worker/run-lease.js';
import { eventually, setup } from './setup.js';

describe('a result too large for the queue', () => {
  test('fails the job at once, saying so, and no finish is sent', async () => {
    const s = await setup();
    await s.client.enqueue({ id: 'huge', qty: 1 });
    const { worker, events } = s.worker();

    const outcome = await worker.process((await worker.claim())!, () => 'x'.repeat(1024 * 1024));

    expect(outcome).toMatchObject({ status: 'failed', job: { status: 'pending', attempts: 1 } });
    const job = await s.client.get('huge');
    expect(job?.lastError).toMatch(/^the handler returned a result of 1048578 bytes as JSON; a finish carries at most/);
    expect(events.map((e) => e.event)).not.toContain('call_failed');
  });
});

describe('a result that is not a JSON value', () => {
  // Finished, it would be recorded changed: the function left out, the Date a string.
  test.each([
    [{ total: 3, format: () => 'x' }, 'result.format is a function, which JSON leaves out'],
    [
      { lines: [{ at: new Date(0) }] },
      'result.lines[0].at is a Date, which JSON writes as a string: give date.toISOString() or date.getTime()',
    ],
    [{ ratio: NaN }, 'result.ratio is NaN, which JSON writes as null'],
    [() => 'x', 'result is a function, which JSON leaves out'],
  ])('%o fails the job at once, saying where, and no finish is sent', async (result, where) => {
    const s = await setup();
    await s.client.enqueue({ id: 'odd', qty: 1 });
    const { worker, events } = s.worker();

    const outcome = await worker.process((await worker.claim())!, () => result);

    expect(outcome).toMatchObject({ status: 'failed', job: { status: 'pending', attempts: 1 } });
    expect((await s.client.get('odd'))?.lastError).toBe(`the handler returned a result that is not JSON: ${where}`);
    expect(events.map((e) => e.event)).not.toContain('finished');
  });
});

describe('a result with more keys or depth than the queue takes', () => {
  /** An object of `keys` keys, all at the top. */
  const keyed = (keys: number) => Object.fromEntries(Array.from({ length: keys }, (_, i) => [`k${i}`, i]));
  /** Arrays nested `depth` deep: `[[…[]…]]`. */
  const nested = (depth: number): unknown[] => (depth === 1 ? [] : [nested(depth - 1)]);

  test.each([
    [
      'keys',
      keyed(MAX_RESULT_KEYS + 1),
      /^the handler returned a result of \d+ object keys; a finish carries at most \d+/,
    ],
    [
      'depth',
      nested(MAX_RESULT_DEPTH + 1),
      /^the handler returned a result nested \d+ deep; a finish carries at most \d+/,
    ],
  ])(
    '%s past what a finish carries: fails the job at once, saying so, and no finish is sent',
    async (_kind, result, message) => {
      const s = await setup();
      await s.client.enqueue({ id: 'wide', qty: 1 });
      const { worker, events } = s.worker();

      const outcome = await worker.process((await worker.claim())!, () => result);

      expect(outcome).toMatchObject({ status: 'failed', job: { status: 'pending', attempts: 1 } });
      expect((await s.client.get('wide'))?.lastError).toMatch(message);
      expect(events.map((e) => e.event)).not.toContain('call_failed');
    },
  );

  test.each([
    ['keys', keyed(MAX_RESULT_KEYS)],
    ['depth', nested(MAX_RESULT_DEPTH)],
  ])('exactly the most %s a finish carries: finished, and the queue keeps the result', async (_kind, result) => {
    const s = await setup();
    await s.client.enqueue({ id: 'edge', qty: 1 });
    const { worker } = s.worker();

    const outcome = await worker.process((await worker.claim())!, () => result);

    expect(outcome).toMatchObject({ status: 'finished' });
    expect((await s.client.get('edge'))?.result).toEqual(result);
  });
});

describe('ctx.outputDir()', () => {
  test("is the lease's own folder, made on first use; the finish records it as the job's output", async () => {
    const s = await setup();
    const root = join(s.dir, 'outputs');
    const id = 'reports/2024/../x';
    await s.client.enqueue({ id, qty: 1 });
    const { worker, events } = s.worker({ outputRoot: root });

    let dir = '';
    const outcome = await worker.process((await worker.claim())!, async (ctx) => {
      dir = await ctx.outputDir();
      expect(await ctx.outputDir()).toBe(dir);
      await writeFile(join(dir, 'report.txt'), 'hello');
      return { pages: 3 };
    });

    const generation = 'reports%2F2024%2F..%2Fx/1';
    expect(dir).toBe(join(root, generation));
    expect(readFileSync(join(root, generation, 'report.txt'), 'utf8')).toBe('hello');
    expect(outcome).toMatchObject({ status: 'finished', result: { pages: 3, output: generation } });
    expect((await s.client.get(id)).result).toEqual({ pages: 3, output: generation });
    expect(events.find((e) => e.event === 'output')).toMatchObject({ job: id, token: 1, path: generation });
  });

  test('without an outputRoot it says what is missing; a handler that does not use it records no output', async () => {
    const s = await setup();
    await s.client.enqueue({ id: 'a', qty: 1 });
    await s.client.enqueue({ id: 'b', qty: 1 });
    const plain = s.worker().worker;
    const error = await plain
      .process((await plain.claim())!, (ctx) => ctx.outputDir())
      .then((o) => (o.status === 'failed' ? o.error : ''));
    expect(error).toMatch(/needs the worker's outputRoot option/);

    const withRoot = s.worker({ name: 'w2', outputRoot: join(s.dir, 'outputs') }).worker;
    await withRoot.process((await withRoot.claim())!, () => 'plain');
    expect((await s.client.get('b')).result).toBe('plain');
  });

  test("two holders never share a path: the winner's output stays, the stale one is removed, and the stale holder can make no new one", async () => {
    const s = await setup();
    const root = join(s.dir, 'outputs');
    await s.client.enqueue({ id: 'j', qty: 1 });
    const first = s.worker({ name: 'w1', outputRoot: root });
    let staleContext: JobContext | undefined;
    let lateOutputDir: unknown;

    const firstRun = first.worker.process((await first.worker.claim())!, async (ctx) => {
      staleContext = ctx;
      await writeFile(join(await ctx.outputDir(), 'part.txt'), 'from token 1');
      await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve));
      lateOutputDir = await ctx.outputDir().catch((err: unknown) => err);
    });
    await eventually('the first generation to be written', () =>
      existsSync(join(root, 'j', '1', 'part.txt')) ? true : undefined,
    );
    // The first holder stalls past its lease; w2 takes the job over under token 2.
    const taken = await s.takeOver('j', 'w2');
    const second = s.worker({ name: 'w2', outputRoot: root });
    const secondOutcome = await second.worker.process({ lease: taken, claimedAt: Date.now() }, async (ctx) => {
      await writeFile(join(await ctx.outputDir(), 'part.txt'), 'from token 2');
      return { ok: true };
    });

    expect(secondOutcome).toMatchObject({ status: 'finished', result: { ok: true, output: 'j/2' } });
    // Refused on its next renewal: claimed again (token_mismatch), or already done (not_leased).
    const firstOutcome = await firstRun;
    expect(firstOutcome.status).toBe('lost');
    expect(['token_mismatch', 'not_leased']).toContain(firstOutcome.status === 'lost' && firstOutcome.error.reason);
    expect(staleContext!.signal.aborted).toBe(true);
    expect(lateOutputDir).toBeInstanceOf(LeaseLostError);
    expect(readFileSync(join(root, 'j', '2', 'part.txt'), 'utf8')).toBe('from token 2');
    expect(existsSync(join(root, 'j', '1'))).toBe(false);
    const cleaned = [...first.events, ...second.events].filter((e) => e.event === 'cleaned');
    expect(cleaned.flatMap((e) => (e.event === 'cleaned' ? e.removed : []))).toEqual([1]);
  });
});

describe('cleanupOrphans', () => {
  test('a claim made while it runs: the new holder and the one before it keep their folders; only what is below the token read goes', async () => {
    const s = await setup();
    const root = join(s.dir, 'outputs');
    await s.client.enqueue({ id: 'r', qty: 1 });
    await s.client.claim('a', 60_000);
    await s.takeOver('r', 'b');
    const made = (token: number) => {
      mkdirSync(join(root, 'r', String(token)), { recursive: true });
      writeFileSync(join(root, 'r', String(token), 'out.txt'), `token ${token}`);
    };
    made(1);
    made(2);
    mkdirSync(join(root, 'r', 'tmp-not-a-generation'));

    // Between the cleanup's read of the row and its listing, c claims the job and writes.
    const racing = {
      get: async (id: string) => {
        const row = await s.client.get(id);
        const lease = await s.takeOver(id, 'c');
        made(lease.token);
        return row;
      },
    };
    await expect(cleanupOrphans(root, 'r', racing)).resolves.toEqual({ removed: [1], kept: [2, 3] });
    expect(existsSync(join(root, 'r', '3', 'out.txt'))).toBe(true);
    expect(existsSync(join(root, 'r', 'tmp-not-a-generation'))).toBe(true);

    // Run again on the row as it is now: token 3 is current, 2 can no longer win.
    await expect(cleanupOrphans(root, 'r', s.client)).resolves.toEqual({ removed: [2], kept: [3] });
    await s.client.finish('r', { owner: 'c', token: 3, result: { output: 'r/3' } });
    await expect(cleanupOrphans(root, 'r', s.client)).resolves.toEqual({ removed: [], kept: [3] });
    expect(readFileSync(join(root, 'r', '3', 'out.txt'), 'utf8')).toBe('token 3');
    // A job with no folder here: nothing to do.
    await s.client.enqueue({ id: 'none', qty: 1 });
    await expect(cleanupOrphans(root, 'none', s.client)).resolves.toEqual({ removed: [], kept: [] });
  });

  test('two cleanups at once (the winner and the stale holder): each orphan is removed and reported once', async () => {
    const s = await setup();
    const root = join(s.dir, 'outputs');
    await s.client.enqueue({ id: 'twice', qty: 1 });
    await s.client.claim('a', 60_000);
    await s.takeOver('twice', 'b');
    for (const token of [1, 2]) {
      mkdirSync(join(root, 'twice', String(token)), { recursive: true });
      writeFileSync(join(root, 'twice', String(token), 'out.txt'), `token ${token}`);
    }

    const both = await Promise.all([cleanupOrphans(root, 'twice', s.client), cleanupOrphans(root, 'twice', s.client)]);

    expect(both.flatMap((c) => c.removed)).toEqual([1]);
    expect(both.map((c) => c.kept)).toEqual([[2], [2]]);
    expect(readdirSync(join(root, 'twice'))).toEqual(['2']);
  });
});
