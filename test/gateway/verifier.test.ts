// Coalesced lease checks against a real queue service: overlapping checks share one request and
// each gets its own answer; a lone check goes alone; a caller that gives up is answered alone.
import { afterEach, expect, test } from 'vitest';
import { join } from 'node:path';
import { QueueClient, QueueError, startQueue, type QueueService } from '../../queue/index.js';
import { CoalescingVerifier } from '../../gateway/verifier.js';
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

test('twenty overlapping checks take at most a few requests, and each gets its own answer', async () => {
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
  // The first goes alone; the other nineteen wait for it and go together.
  expect(verifier.counts.requests, 'queue requests for 20 overlapping checks').toBeLessThanOrEqual(3);
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
