// kill -9 of a running queue service: every acknowledged enqueue, claim and finish survives.
import { afterEach, expect, test } from 'vitest';
import { join } from 'node:path';
import { QueueClient, type Job } from '../../queue/index.js';
import { startProcess } from '../helpers/processes.js';
import { tempDir } from '../helpers/tmp.js';

const clients: QueueClient[] = [];
afterEach(() => {
  clients.splice(0).forEach((c) => c.close());
});

test('kill -9 loses no acknowledged enqueue, claim or finish', async () => {
  const db = join(tempDir('leasehold-crash-'), 'queue.sqlite');
  const first = await startProcess('queue', ['--port', '0', '--db', db, '--log-level', 'warn']);
  const client = new QueueClient(first.url, { timeoutMs: 5_000 });
  clients.push(client);

  const enqueued = new Set<string>();
  const claimed = new Map<string, number>();
  const finished = new Set<string>();
  let stop = false;
  const loop = async (n: number) => {
    for (let i = 0; !stop; i++) {
      try {
        const id = `w${n}-${i}`;
        await client.enqueue({ id, qty: 1 });
        enqueued.add(id);
        const lease = await client.claim(`worker-${n}`, 600_000);
        if (!lease) continue;
        claimed.set(lease.id, lease.token);
        await client.finish(lease.id, { owner: lease.owner, token: lease.token });
        finished.add(lease.id);
      } catch {
        return; // the service is gone: whatever was not acknowledged may or may not be there
      }
    }
  };
  const loops = [0, 1, 2, 3].map(loop);
  // Kill once some work is acknowledged, not after a fixed time: a loaded machine is slower.
  const started = Date.now();
  while (finished.size <= 20 && Date.now() - started < 30_000) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  first.child.kill('SIGKILL');
  stop = true;
  await Promise.all(loops);
  await first.stop('SIGKILL');
  expect(finished.size, 'work acknowledged before the kill').toBeGreaterThan(10);

  const second = await startProcess('queue', ['--port', '0', '--db', db, '--log-level', 'warn']);
  const after = new QueueClient(second.url);
  clients.push(after);
  const jobs = new Map<string, Job>();
  for (const id of enqueued) jobs.set(id, await after.get(id).catch(() => undefined as unknown as Job));
  for (const [id, job] of jobs) if (!job) jobs.delete(id);
  const missing = [...enqueued].filter((id) => !jobs.has(id));
  const lostClaims = [...claimed].filter(
    ([id, token]) => jobs.get(id)?.token !== token || jobs.get(id)?.status === 'pending',
  );
  const lostFinishes = [...finished].filter((id) => jobs.get(id)?.status !== 'done');
  expect({ missing, lostClaims, lostFinishes }).toEqual({ missing: [], lostClaims: [], lostFinishes: [] });
});
