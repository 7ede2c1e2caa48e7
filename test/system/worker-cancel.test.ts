// Cancelling a job while a real `leasehold worker` process is in the middle of it: its next
// renewal is refused, the handler's signal aborts with a loss whose reason is "cancelled", nothing
// is sent, and the worker goes on with its other work. Run after `npm run build`.
import { describe, expect, onTestFinished, test } from 'vitest';
import { spawnCli } from '../../platform/spawn.js';
import type { WorkerLine } from '../../worker/index.js';
import { CLI, ROOT, cleanEnv } from '../helpers/processes.js';
import { eventually, setup } from '../worker/setup.js';

describe('a job cancelled while a worker process holds it', () => {
  test('the worker learns on its next renewal: lost (cancelled), no effect, the next job goes on', async () => {
    const s = await setup();
    await s.client.enqueue({ id: 'doomed', qty: 4 });
    const lines: string[] = [];
    const events: WorkerLine[] = [];
    const child = spawnCli(
      CLI,
      'worker',
      [
        ...['--queue', s.queue.url, '--gateway', s.gateway.url, '--name', 'cw'],
        ...['--lease-ms', '900', '--work-ms', '1500', '--grace-ms', '100'],
      ],
      {
        cwd: ROOT,
        env: cleanEnv(),
        onLine: (line) => {
          lines.push(line);
          if (line.startsWith('{')) events.push(JSON.parse(line) as WorkerLine);
        },
      },
    );
    onTestFinished(({ task }) => {
      child.signal('SIGKILL');
      if (task.result?.state === 'fail') console.error(`stdout:\n${lines.join('\n')}\nstderr:\n${child.stderr()}`);
    });
    const has = (event: string, job?: string) =>
      events.some((e) => e.event === event && (job === undefined || ('job' in e && e.job === job))) || undefined;

    await eventually('the worker to claim the job', () => has('claimed', 'doomed'), 20_000);
    const cancelled = await s.client.cancel('doomed', { reason: 'no longer wanted' });
    expect(cancelled).toMatchObject({ status: 'dead', deadReason: 'cancelled' });
    await eventually('the worker to report the loss', () => has('lost', 'doomed'), 10_000);
    // Another job after the cancelled one: the worker is still at work.
    await s.client.enqueue({ id: 'after', qty: 1 });
    await eventually('the next job to be done', () => has('finished', 'after'), 20_000);
    child.signal('SIGTERM');

    expect(await child.exited).toEqual({ code: 0, signal: null });
    const refused = events.find((e) => e.event === 'refused' && e.job === 'doomed');
    expect(refused).toMatchObject({ op: 'renew', status: 409, code: 'stale_lease', reason: 'not_leased' });
    expect(refused).toMatchObject({ current: { status: 'dead' } });
    const lost = events.find((e) => e.event === 'lost');
    expect(lost).toMatchObject({ job: 'doomed', token: 1, during: 'renew', reason: 'cancelled' });
    expect(lost).toMatchObject({ error: expect.stringContaining('the job was cancelled') });
    // The handler stopped: no send for the cancelled job, nothing finished or failed under it.
    const doomed = events.filter((e) => 'job' in e && e.job === 'doomed').map((e) => e.event);
    expect(doomed.filter((n) => n !== 'renewed')).toEqual(['claimed', 'refused', 'lost']);
    expect(events.at(-1)).toMatchObject({ event: 'stopped', claimed: 2, finished: 1, lost: 1 });
    expect(await s.receiver.journal()).toMatchObject([{ jobId: 'after', outcome: 'applied' }]);
    expect(await s.client.get('doomed')).toMatchObject({ status: 'dead', deadReason: 'cancelled', token: 1 });
  });
});
