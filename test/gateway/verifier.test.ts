// Coalesced lease checks against a real queue service: overlapping checks share one request and
// each gets its own answer; a lone check goes alone; a caller that gives up is answered alone;
// one send's request id or input never fails another's check.
import { afterEach, expect, test } from 'vitest';
import { join } from 'node:path';
import { pino } from 'pino';
import { QueueClient, QueueError, startQueue, type Lease, type QueueService } from '../../queue/index.js';
import { CoalescingVerifier, type VerifyApi } from '../../gateway/verifier.js';
import { withRequestId, withRequestIds } from '../../platform/request-id.js';
import { tempDir } from '../helpers/tmp.js';

const closers: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

async function setup(jobs: number) {
  const service: QueueService = await startQueue({ db: join(tempDir('leasehold-verifier-'), 'q.sqlite'), port: 0 });
  closers.push(() => service.close());
  const client = new QueueClient(service.url);
  closers.push(() => client.close());
  for (let i = 0; i < jobs; i++) await client.enqueue({ id: `j${i}`, qty: 1 });
  const leases = await client.claimMany('w1', { max: jobs, leaseMs: 60_000 });
  return { client, leases, verifier: new CoalescingVerifier(client) };
}

test('twenty checks made together take one request, and each gets its own answer', async () => {
  const { leases, verifier } = await setup(20);
  const answers = await Promise.allSettled(
    leases.map((lease, i) =>
      verifier.verify(lease.id, { owner: 'w1', token: i % 5 === 0 ? lease.token + 1 : lease.token }),
    ),
  );
  answers.forEach((answer, i) => {
    if (i % 5 === 0) {
      expect(answer.status, `check ${i} with a wrong token`).toBe('rejected');
      const err = (answer as PromiseRejectedResult).reason as QueueError;
      expect(err).toBeInstanceOf(QueueError);
      expect(err.details).toMatchObject({ reason: 'token_mismatch' });
    } else {
      expect(answer, `check ${i}`).toEqual({ status: 'fulfilled', value: leases[i] });
    }
  });
  expect(verifier.counts.checks).toBe(20);
  // Made in one turn of the event loop, all twenty go together.
  expect(verifier.counts.requests, 'queue requests for 20 checks made in one turn').toBe(1);
});

test('checks one after another each go alone, as plain verifies', async () => {
  const { leases, verifier } = await setup(3);
  for (const lease of leases) expect(await verifier.verify(lease.id, lease)).toEqual(lease);
  expect(verifier.counts).toEqual({ requests: 3, checks: 3 });
});

test('a check whose caller gives up is rejected with its reason; the others are answered', async () => {
  const { leases, verifier } = await setup(3);
  const controller = new AbortController();
  const first = verifier.verify(leases[0]!.id, leases[0]!);
  const abandoned = verifier.verify(leases[1]!.id, leases[1]!, { signal: controller.signal });
  const kept = verifier.verify(leases[2]!.id, leases[2]!);
  controller.abort(new Error('caller gone'));
  await expect(abandoned).rejects.toThrow('caller gone');
  expect(await first).toEqual(leases[0]);
  expect(await kept).toEqual(leases[2]);
});

/** A request id as long as a send may carry: 100 ids of 128 characters, comma-separated. */
const longIds = (tag: string) => Array.from({ length: 100 }, (_, i) => `${tag}-${i}-`.padEnd(128, 'x')).join(',');

test('sends with long request-id lists in one batch fail no one: each check gets its own answer', async () => {
  const { leases, verifier } = await setup(4);
  const check = (i: number, requestId: string, token = leases[i]!.token) =>
    withRequestId(requestId, () => verifier.verify(leases[i]!.id, { owner: 'w1', token }));
  // The four share one request, two of them carrying 100 long ids each.
  const first = check(0, 'plain-0');
  const answers = await Promise.allSettled([check(1, longIds('a')), check(2, longIds('b')), check(3, 'valid-3')]);
  expect(await first).toEqual(leases[0]);
  expect(answers).toEqual([
    { status: 'fulfilled', value: leases[1] },
    { status: 'fulfilled', value: leases[2] },
    { status: 'fulfilled', value: leases[3] },
  ]);
  // A refusal still belongs to its own check.
  const wrong = await Promise.allSettled([
    check(0, 'plain-0'),
    check(1, longIds('c'), leases[1]!.token + 1),
    check(2, 'valid-2'),
  ]);
  expect(wrong.map((answer) => answer.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
  expect((wrong[1] as PromiseRejectedResult).reason).toMatchObject({ code: 'stale_lease' });
});

test('the batch carries its sends’ ids when they fit, else an id of its own, and logs which sends it served', async () => {
  const seen: Array<string | undefined> = [];
  const logged: Array<Record<string, unknown>> = [];
  const lease = (id: string): Lease => ({
    id,
    qty: 1,
    payload: null,
    owner: 'w',
    token: 1,
    attempt: 1,
    leaseUntil: 0,
    deadline: null,
  });
  const verifier = new CoalescingVerifier(
    {
      verify: async (id) => {
        await new Promise((resolve) => setTimeout(resolve, 10));
        return lease(id);
      },
      verifyMany: async (checks, options) => {
        seen.push(options?.requestId);
        return checks.map((c) => lease(c.id));
      },
    },
    withRequestIds(
      pino(
        { level: 'info' },
        { write: (line: string) => void logged.push(JSON.parse(line) as Record<string, unknown>) },
      ),
    ),
  );
  const check = (id: string, requestId: string) =>
    withRequestId(requestId, () => verifier.verify(id, { owner: 'w', token: 1 }));
  await Promise.all([check('a', 'r-a'), check('b', 'r-b'), check('c', 'r-c,r-b')]);
  await Promise.all([check('a', 'r-a'), check('b', longIds('b')), check('c', 'r-c')]);
  expect(seen[0]).toBe('r-a,r-b,r-c');
  expect(seen[1]).toMatch(/^batch-[0-9a-f-]{36}$/);
  expect(logged.map((line) => [line.reqId, line.batch, line.msg])).toEqual([
    ['r-a', seen[1], 'lease check sent in a batch'],
    [longIds('b'), seen[1], 'lease check sent in a batch'],
    ['r-c', seen[1], 'lease check sent in a batch'],
  ]);
});

test('a batch refused as a whole is asked again check by check; an unreachable queue fails it at once', async () => {
  const lease = (id: string): Lease => ({
    id,
    qty: 1,
    payload: null,
    owner: 'w',
    token: 1,
    attempt: 1,
    leaseUntil: 0,
    deadline: null,
  });
  const calls: string[] = [];
  const api = (refusal: unknown): VerifyApi => ({
    verify: async (id) => {
      calls.push(`verify ${id}`);
      await new Promise((resolve) => setTimeout(resolve, 10));
      if (id === 'bad') throw new QueueError('invalid_request', 'bad alone');
      return lease(id);
    },
    verifyMany: async (checks) => {
      calls.push(`verifyMany ${checks.map((c) => c.id).join(',')}`);
      throw refusal;
    },
  });
  const refused = new CoalescingVerifier(
    api(
      new QueueError('invalid_request', 'The queue answered 431 without a recognisable error body.', { status: 431 }),
    ),
  );
  const answers = await Promise.allSettled(
    ['first', 'ok', 'bad'].map((id) => refused.verify(id, { owner: 'w', token: 1 })),
  );
  expect(answers.map((a) => (a.status === 'fulfilled' ? a.value.id : (a.reason as Error).message))).toEqual([
    'first',
    'ok',
    'bad alone',
  ]);
  expect(calls).toEqual(['verifyMany first,ok,bad', 'verify first', 'verify ok', 'verify bad']);
  expect(refused.counts).toEqual({ requests: 4, checks: 3 });

  calls.length = 0;
  const down = new QueueError('queue_unavailable', 'The queue at http://127.0.0.1:1 could not be reached.');
  const unreachable = new CoalescingVerifier(api(down));
  const failed = await Promise.allSettled(
    ['first', 'ok', 'other'].map((id) => unreachable.verify(id, { owner: 'w', token: 1 })),
  );
  expect(failed.map((a) => a.status)).toEqual(['rejected', 'rejected', 'rejected']);
  expect((failed[1] as PromiseRejectedResult).reason).toBe(down);
  expect(calls).toEqual(['verifyMany first,ok,other']);
});
