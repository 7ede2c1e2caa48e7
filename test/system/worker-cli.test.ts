// `leasehold worker` and `leasehold start` as real processes: the worker's JSON event lines,
// its --help, several jobs at once, a clean stop on SIGTERM that releases the job in hand, a
// second signal that exits at once; the three services started together and stopped with
// Ctrl-C. Run after `npm run build`.
import type { ChildProcess } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, expect, onTestFinished, test } from 'vitest';
import { spawnCli, type ExitInfo } from '../../platform/spawn.js';
import type { WorkerLine } from '../../worker/index.js';
import { QueueClient } from '../../queue/client.js';
import { startGateway } from '../../gateway/service.js';
import { closeAfterTest, setup } from '../worker/setup.js';
import { CLI, ROOT, cleanEnv } from '../helpers/processes.js';
import { tempDir } from '../helpers/tmp.js';

interface Run {
  child: ChildProcess;
  lines: string[];
  events: WorkerLine[];
  exited: Promise<ExitInfo>;
  /** Resolves with the first line that matches. */
  line(pattern: RegExp, timeoutMs?: number): Promise<string>;
  stderr(): string;
}

/** `leasehold worker` on `s` with a job that takes a minute, so that a stop always finds it mid-job. */
function midJobWorker(s: Awaited<ReturnType<typeof setup>>, name: string, graceMs: number): Run {
  return workerOn(s, name, '--lease-ms', '900', '--work-ms', '60000', '--grace-ms', String(graceMs));
}

/** `leasehold worker` named `name` on `s`'s queue and gateway, with more flags. */
function workerOn(s: Awaited<ReturnType<typeof setup>>, name: string, ...flags: string[]): Run {
  return cli(['worker', '--queue', s.queue.url, '--gateway', s.gateway.url, '--name', name, ...flags]);
}

/** Starts `leasehold <args>`; prints its output if the test fails; kills it after the test. */
function cli([command = '', ...args]: string[]): Run {
  const lines: string[] = [];
  const events: WorkerLine[] = [];
  const waiters: Array<{ pattern: RegExp; resolve: (line: string) => void }> = [];
  const onLine = (line: string) => {
    lines.push(line);
    if (line.startsWith('{')) events.push(JSON.parse(line) as WorkerLine);
    for (const waiter of waiters.filter((w) => w.pattern.test(line))) {
      waiters.splice(waiters.indexOf(waiter), 1);
      waiter.resolve(line);
    }
  };
  const child = spawnCli(CLI, command, args, { cwd: ROOT, env: cleanEnv(), onLine });
  onTestFinished(({ task }) => {
    child.signal('SIGKILL');
    if (task.result?.state === 'fail')
      console.error(`leasehold ${command} ${args.join(' ')}\nstdout:\n${lines.join('\n')}\nstderr:\n${child.stderr()}`);
  });
  return {
    child: child.process,
    lines,
    events,
    exited: child.exited,
    stderr: () => child.stderr(),
    line: (pattern, timeoutMs = 20_000) =>
      new Promise((resolve, reject) => {
        const found = lines.find((l) => pattern.test(l));
        if (found !== undefined) return resolve(found);
        const timer = setTimeout(
          () => reject(new Error(`no line matching ${pattern} within ${timeoutMs} ms`)),
          timeoutMs,
        );
        waiters.push({ pattern, resolve: (l) => (clearTimeout(timer), resolve(l)) });
      }),
  };
}

describe('leasehold worker', () => {
  test('--help explains every flag', async () => {
    const run = cli(['worker', '--help']);
    expect((await run.exited).code).toBe(0);
    const help = run.lines.join('\n');
    for (const flag of [
      '--queue',
      '--gateway',
      '--name',
      '--lease-ms',
      '--concurrency',
      '--wait-ms',
      '--poll-ms',
      '--work-ms',
      '--send-retry-ms',
      '--max-jobs',
      '--grace-ms',
      '--output-root',
      '--stall-before-send',
      '--stall-before-finish',
      '--stall-ms',
      '--log-level',
    ]) {
      expect(help).toContain(flag);
    }
    for (const variable of [
      'LEASEHOLD_QUEUE',
      'LEASEHOLD_GATEWAY',
      'LEASEHOLD_LEASE_MS',
      'LEASEHOLD_CONCURRENCY',
      'LEASEHOLD_GRACE_MS',
      'LEASEHOLD_LOG_LEVEL',
    ])
      expect(help).toContain(variable);
    expect(help).toMatch(/one JSON line per event on stdout/);
    expect(help).toMatch(/SIGTERM or SIGINT/);
  });

  test.each([
    [['--lease-ms', '100'], 'leasehold worker: --lease-ms must be an integer of at least 300, not "100"'],
    [['--queue', 'ftp://example'], 'leasehold worker: --queue must be an http:// URL'],
    [['--concurrency', '101'], 'leasehold worker: --concurrency must be an integer from 1 to 100, not 101'],
    [['--wait-ms', '30001'], 'leasehold worker: --wait-ms must be an integer from 0 to 30000, not 30001'],
    [['--output-root', ''], 'leasehold worker: --output-root must be a folder path, not ""'],
  ])('bad flags %j: one line on stderr, exit code 2', async (args, line) => {
    const run = cli(['worker', ...args]);
    expect((await run.exited).code).toBe(2);
    expect(run.lines).toEqual([]);
    expect(run.stderr()).toMatch(/^[^\n]+\n$/);
    expect(run.stderr()).toContain(line);
  });

  test('works through the queue, printing one JSON line per event, and exits 0 after --max-jobs', async () => {
    const s = await setup();
    await s.client.enqueue({ id: 'a', qty: 2 });
    await s.client.enqueue({ id: 'b', qty: 5 });
    const run = cli([
      'worker',
      '--queue',
      s.queue.url,
      '--gateway',
      s.gateway.url,
      '--name',
      'cli-1',
      '--lease-ms',
      '900',
      '--poll-ms',
      '50',
      '--work-ms',
      '400',
      '--max-jobs',
      '2',
    ]);

    expect(await run.exited).toEqual({ code: 0, signal: null });
    expect(run.lines.every((l) => l.startsWith('{'))).toBe(true);
    const names = run.events.map((e) => e.event);
    expect(names[0]).toBe('started');
    expect(names.at(-1)).toBe('stopped');
    for (const id of ['a', 'b']) {
      const mine = run.events.filter((e) => 'job' in e && e.job === id).map((e) => e.event);
      expect(mine.filter((n) => n !== 'renewed')).toEqual(['claimed', 'sent', 'finished']);
    }
    expect(run.events.find((e) => e.event === 'claimed')).toMatchObject({
      worker: 'cli-1',
      job: 'a',
      token: 1,
      attempt: 1,
      qty: 2,
    });
    expect(run.events.every((e) => e.worker === 'cli-1' && Number.isInteger(e.t))).toBe(true);
    expect(await s.receiver.totals()).toEqual({ effects: 2, qty: 7 });
  });

  test('SIGTERM mid-job: no new claims; after --grace-ms the lease is released, the attempt given back; exit 0', async () => {
    const s = await setup();
    await s.client.enqueue({ id: 'long', qty: 1 });
    await s.client.enqueue({ id: 'next', qty: 1 });
    const run = midJobWorker(s, 'cli-2', 300);
    await run.line(/"event":"claimed"/);
    run.child.kill('SIGTERM');

    expect(await run.exited).toEqual({ code: 0, signal: null });
    expect(run.events.map((e) => e.event).filter((n) => n !== 'renewed')).toEqual([
      'started',
      'claimed',
      'stopping',
      'grace_over',
      'released',
      'stopped',
    ]);
    expect(run.events.at(-1)).toMatchObject({ claimed: 1, released: 1, finished: 0, failed: 0, lost: 0 });
    // Claimable at once, and its attempt not spent.
    expect(await s.client.get('long')).toMatchObject({ status: 'pending', attempts: 0, lastError: null });
    expect(await s.client.get('next')).toMatchObject({ status: 'pending', attempts: 0 });
    const leases = await s.client.claimMany('other', { max: 2, leaseMs: 900 });
    expect(leases.find((l) => l.id === 'long')).toMatchObject({ token: 2, attempt: 1 });
    expect(await s.receiver.journal()).toEqual([]);
  });

  test('stdout closed by its reader mid-job: stops as on SIGTERM, the lease released, exit 0 without a stack trace', async () => {
    const s = await setup();
    await s.client.enqueue({ id: 'piped', qty: 1 });
    const run = midJobWorker(s, 'cli-pipe', 300);
    await run.line(/"event":"claimed"/);
    // As `leasehold worker | head -2` does after its second line; the next renewal's line finds no reader.
    run.child.stdout!.destroy();

    expect(await run.exited).toEqual({ code: 0, signal: null });
    expect(run.stderr()).not.toMatch(/EPIPE|Unhandled|\n\s+at /);
    expect(run.stderr()).toContain('stdout closed: no new claims');
    expect(await s.client.get('piped')).toMatchObject({ status: 'pending', attempts: 0, lastError: null });
  });

  test('a second SIGTERM exits at once with 1, printing an "exiting" line', async () => {
    const s = await setup();
    await s.client.enqueue({ id: 'long', qty: 1 });
    const run = midJobWorker(s, 'cli-3', 60000);
    await run.line(/"event":"claimed"/);
    run.child.kill('SIGTERM');
    await run.line(/"event":"stopping"/);
    const secondAt = Date.now();
    run.child.kill('SIGTERM');

    expect(await run.exited).toEqual({ code: 1, signal: null });
    expect(Date.now() - secondAt).toBeLessThan(5_000);
    expect(run.events.map((e) => e.event).filter((n) => n !== 'renewed')).toEqual([
      'started',
      'claimed',
      'stopping',
      'exiting',
    ]);
    expect(run.events.at(-1)).toMatchObject({ event: 'exiting', signal: 'SIGTERM', running: 1 });
    // Nothing was handed back: the job is still leased until its lease runs out.
    expect(await s.client.get('long')).toMatchObject({ status: 'leased', owner: 'cli-3', token: 1 });
  });

  test('--concurrency 3: three jobs at once, each under its own lease, all finished once', async () => {
    const s = await setup();
    for (const id of ['a', 'b', 'c', 'd', 'e', 'f']) await s.client.enqueue({ id, qty: 1 });
    const run = cli([
      'worker',
      '--queue',
      s.queue.url,
      '--gateway',
      s.gateway.url,
      '--name',
      'cli-4',
      '--lease-ms',
      '3000',
      '--concurrency',
      '3',
      '--work-ms',
      '300',
      '--max-jobs',
      '6',
    ]);

    expect(await run.exited).toEqual({ code: 0, signal: null });
    expect(run.events[0]).toMatchObject({ event: 'started', concurrency: 3 });
    expect(run.events.at(-1)).toMatchObject({ event: 'stopped', claimed: 6, finished: 6 });
    // At some moment three were claimed and none of them finished yet.
    let inFlight = 0;
    let most = 0;
    for (const e of run.events) {
      if (e.event === 'claimed') most = Math.max(most, (inFlight += 1));
      if (e.event === 'finished') inFlight -= 1;
    }
    expect(most).toBe(3);
    expect(await s.receiver.totals()).toEqual({ effects: 6, qty: 6 });
  });

  test('--prefetch 2 with --concurrency 1: three leases held, one job worked at a time, each effect once', async () => {
    const s = await setup();
    for (const id of ['a', 'b', 'c', 'd', 'e', 'f']) await s.client.enqueue({ id, qty: 1 });
    const run = cli([
      'worker',
      '--queue',
      s.queue.url,
      '--gateway',
      s.gateway.url,
      '--name',
      'cli-5',
      '--lease-ms',
      '3000',
      '--concurrency',
      '1',
      '--prefetch',
      '2',
      '--work-ms',
      '150',
      '--max-jobs',
      '6',
    ]);

    expect(await run.exited).toEqual({ code: 0, signal: null });
    expect(run.events[0]).toMatchObject({ event: 'started', concurrency: 1, prefetch: 2 });
    expect(run.events.at(-1)).toMatchObject({ event: 'stopped', claimed: 6, finished: 6 });
    let held = 0;
    let mostHeld = 0;
    for (const e of run.events) {
      if (e.event === 'claimed') mostHeld = Math.max(mostHeld, (held += 1));
      if (e.event === 'finished') held -= 1;
    }
    expect(mostHeld, 'leases held at once').toBe(3);
    // One at a time: each job's effect is sent after the previous one's.
    const sends = run.events.filter((e) => e.event === 'sent').map((e) => e.t);
    for (let i = 1; i < sends.length; i++) {
      expect(sends[i]! - sends[i - 1]!, `send ${i + 1} after send ${i}, ms`).toBeGreaterThanOrEqual(100);
    }
    expect(await s.receiver.totals()).toEqual({ effects: 6, qty: 6 });
  });

  // A gateway restarting must not spend the attempts of the jobs in hand: the send is sent again.
  test('the gateway out of reach: the send is tried again under the same lease, and the job finishes on its first attempt', async () => {
    const s = await setup();
    await s.client.enqueue({ id: 'through-outage', qty: 3 });
    const { port } = s.gateway;
    await s.gateway.close();
    const run = workerOn(s, 'w1', '--lease-ms', '2000', '--send-retry-ms', '30000', '--max-jobs', '1');
    await run.line(/"event":"send_failed"/);
    const gateway = await startGateway({ port, queueUrl: s.queue.url, receiverUrl: s.receiver.url });
    closeAfterTest(() => gateway.close());

    expect(await run.exited).toMatchObject({ code: 0 });
    const job = await s.client.get('through-outage');
    expect({ status: job.status, attempts: job.attempts, token: job.token }).toEqual({
      status: 'done',
      attempts: 1,
      token: 1,
    });
    expect(await s.receiver.effects()).toEqual([expect.objectContaining({ jobId: 'through-outage', qty: 3 })]);
    const kinds = run.events.map((e) => e.event);
    expect(
      kinds.filter((k) => k === 'failed'),
      'no attempt spent',
    ).toEqual([]);
    expect(kinds.indexOf('sent')).toBeGreaterThan(kinds.indexOf('send_failed'));
  });

  test('--send-retry-ms 0: a send that finds the gateway out of reach fails the job back to the queue at once', async () => {
    const s = await setup();
    await s.client.enqueue({ id: 'no-retry', qty: 1 });
    await s.gateway.close();
    const run = workerOn(s, 'w1', '--send-retry-ms', '0', '--max-jobs', '1');
    expect(await run.exited).toMatchObject({ code: 0 });
    expect(run.events.filter((e) => e.event === 'send_failed')).toHaveLength(1);
    expect(run.events.find((e) => e.event === 'failed')).toMatchObject({ job: 'no-retry' });
    expect(await s.client.get('no-retry')).toMatchObject({ status: 'pending', attempts: 1 });
  });

  test('--prefetch beyond what one claim holds is a usage error naming the flag', async () => {
    const run = cli(['worker', '--concurrency', '90', '--prefetch', '11']);
    expect(await run.exited).toEqual({ code: 2, signal: null });
    expect(run.stderr()).toContain("leasehold worker: --prefetch must be 'auto' or an integer from 0 to 10, not 11");
    const word = cli(['worker', '--prefetch', 'fast']);
    expect(await word.exited).toEqual({ code: 2, signal: null });
    expect(word.stderr()).toContain('leasehold worker: --prefetch must be "auto" or a whole number, not "fast"');
  });
});

describe('leasehold start', () => {
  test('runs the three services until SIGINT, prints their URLs, then stops them cleanly', async () => {
    const data = join(tempDir('leasehold-start-'), 'data');
    const run = cli([
      'start',
      '--queue-port',
      '0',
      '--gateway-port',
      '0',
      '--receiver-port',
      '0',
      '--data',
      data,
      '--log-level',
      'warn',
    ]);
    await run.line(/Ctrl-C stops all three/);
    const url = (name: string) => new RegExp(`leasehold ${name} +(http://\\S+)`).exec(run.lines.join('\n'))![1]!;
    for (const name of ['queue', 'gateway', 'receiver']) {
      const res = await fetch(`${url(name)}/healthz`);
      expect(res.status).toBe(200);
    }
    // They work together: a job enqueued on the queue, its effect sent through the gateway.
    const queue = new QueueClient(url('queue'));
    closeAfterTest(() => queue.close());
    await queue.enqueue({ id: 'x', qty: 3 });
    const lease = (await queue.claim('me', 5_000))!;
    const sent = await fetch(`${url('gateway')}/send`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jobId: 'x', owner: 'me', token: lease.token, qty: 3 }),
    });
    expect(sent.status).toBe(200);
    expect(existsSync(join(data, 'queue.sqlite'))).toBe(true);
    expect(existsSync(join(data, 'receiver.sqlite'))).toBe(true);

    run.child.kill('SIGINT');
    expect(await run.exited).toEqual({ code: 0, signal: null });
    expect(run.lines.at(-1)).toBe('stopped');
    await expect(fetch(`${url('queue')}/healthz`)).rejects.toThrow();
  });

  test('--data naming a file: one line on stderr saying which flag to change, exit code 1', async () => {
    const file = join(tempDir('leasehold-start-'), 'a-file');
    writeFileSync(file, 'not a folder\n');
    const run = cli(['start', '--queue-port', '0', '--gateway-port', '0', '--receiver-port', '0', '--data', file]);
    expect(await run.exited).toEqual({ code: 1, signal: null });
    expect(run.lines).toEqual([]);
    expect(run.stderr()).toMatch(/^[^\n]+\n$/);
    expect(run.stderr()).toContain(`leasehold start: cannot make the --data folder ${file} (EEXIST`);
    expect(run.stderr()).toContain('pick a folder this process may write to, with --data');
  });

  test("a busy --queue-port: the queue's line names --queue-port, the flag start takes, not the queue's --port", async () => {
    const busy = createServer();
    await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
    onTestFinished(() => new Promise<void>((resolve) => busy.close(() => resolve())));
    const port = (busy.address() as AddressInfo).port;
    const data = tempDir('leasehold-start-');
    const run = cli([
      'start',
      '--queue-port',
      String(port),
      '--gateway-port',
      '0',
      '--receiver-port',
      '0',
      '--data',
      data,
    ]);
    expect(await run.exited).toEqual({ code: 1, signal: null });
    const lines = run
      .stderr()
      .split('\n')
      .filter((line) => line.startsWith('leasehold '));
    expect(lines).toEqual([
      `leasehold queue: port ${port} is in use; pick another with --queue-port, or --queue-port 0 for a free one`,
      'leasehold start: queue exited before it was listening (exit code 1).',
    ]);
  });
});
