// `leasehold worker` as a real process, where its own handler is what is under test: a stop while
// it is sending a job's effect again and again to a gateway out of reach. The queue runs in this
// process; the gateway's port has nothing listening. Run after `npm run build`.
import { existsSync } from 'node:fs';
import { expect, onTestFinished, test } from 'vitest';
import { spawnCli } from '../../platform/spawn.js';
import type { WorkerLine } from '../../worker/index.js';
import { CLI, ROOT, cleanEnv } from '../helpers/processes.js';
import { eventually, setup } from './setup.js';

test('SIGTERM while a send is tried again against an unreachable gateway: the retries end at once, the lease is released', async () => {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run "npm run build" before this test.`);
  const s = await setup();
  await s.client.enqueue({ id: 'outage', qty: 1 });
  // The gateway's address, with nothing listening there any more: every send is gateway_unavailable.
  const gatewayUrl = s.gateway.url;
  await s.gateway.close();
  const events: WorkerLine[] = [];
  const args = ['--queue', s.queue.url, '--gateway', gatewayUrl, '--name', 'w1', '--lease-ms', '1500'];
  // A grace long enough that a worker retrying through it is plainly seen.
  args.push('--grace-ms', '10000', '--send-retry-ms', '60000');
  const worker = spawnCli(CLI, 'worker', args, {
    cwd: ROOT,
    env: cleanEnv(),
    onLine: (line) => {
      if (line.startsWith('{')) events.push(JSON.parse(line) as WorkerLine);
    },
  });
  onTestFinished(async ({ task }) => {
    await worker.stop('SIGKILL');
    if (task.result?.state === 'fail') {
      console.error(`leasehold worker ${args.join(' ')}\nstdout:\n${worker.stdout()}\nstderr:\n${worker.stderr()}`);
    }
  });
  const sendsFailed = () => events.filter((e) => e.event === 'send_failed').length;
  await eventually('a send tried again', () => (sendsFailed() >= 2 ? true : undefined), 20_000);

  const stoppedAt = Date.now();
  worker.process.kill('SIGTERM');
  expect(await worker.exited).toEqual({ code: 0, signal: null });
  const tookMs = Date.now() - stoppedAt;

  const afterStop = events.slice(events.findIndex((e) => e.event === 'stopping') + 1).map((e) => e.event);
  // A send on its way when the signal came may still answer; none starts after it.
  expect(
    afterStop.filter((e) => e === 'send_failed').length,
    `sends failed after the stop (events after it: ${afterStop.join(', ')})`,
  ).toBeLessThanOrEqual(1);
  expect(
    afterStop.filter((e) => e !== 'renewed' && e !== 'send_failed'),
    'the job released without waiting out the grace',
  ).toEqual(['released', 'stopped']);
  expect(tookMs, 'ms from SIGTERM to exit (--grace-ms is 10000)').toBeLessThan(5_000);
  // Claimable at once, its attempt given back.
  expect(await s.client.get('outage')).toMatchObject({ status: 'pending', attempts: 0, lastError: null });
});
