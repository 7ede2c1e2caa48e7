// The demo's scenario end to end, with real processes: each job sends two effects, its qty to
// the receiver and an e-mail to the mailer; a worker frozen before its sends and again before
// its finish wakes up to refusals from both, a killed worker's job is done by another, each
// effect is recorded once per (downstream, job, key), and the receiver's total is the sum of the
// jobs. Run after `npm run build` (it starts dist/).
import { spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';
import { describe, expect, onTestFinished, test } from 'vitest';
import { formatEntry, runDemo, type DemoResult } from '../../demo/index.js';

const CLI = fileURLToPath(new URL('../../dist/cli/leasehold.js', import.meta.url));

/** Keeps the demo's temp dir and prints it with the timeline when the test fails; removes it otherwise. */
function keepOnFailure(result: DemoResult): void {
  onTestFinished(({ task }) => {
    if (task.result?.state === 'fail') {
      console.error(`kept the demo's files: ${result.dir}\n${result.timeline.map(formatEntry).join('\n')}`);
    } else {
      rmSync(result.dir, { recursive: true, force: true });
    }
  });
}

function gone(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return false;
  } catch {
    return true;
  }
}

describe('the demo', () => {
  test(
    'stale sends to both downstreams and stale finish refused, killed job recovered, each effect once',
    { timeout: 150_000 },
    async () => {
      const result = await runDemo({ cliPath: CLI, keep: true, timeoutMs: 120_000 });
      keepOnFailure(result);

      expect(result.reasons).toEqual([]);
      expect(result.ok).toBe(true);
      const final = result.final!;
      const job = (id: string) => final.jobs.find((j) => j.id === id);

      // Frozen inside its stall before its two sends: on waking, both are refused by the gateway
      // and nothing reaches the receiver or the mailer under its token; the job is done by the
      // worker that took it over.
      const { staleSend, staleFinish, kill } = result.scenario;
      expect(staleSend).toMatchObject({
        worker: 'w1',
        before: 'send',
        refusal: { op: 'send', status: 409, code: 'stale_lease' },
        refusedSends: 2,
      });
      const mailer = final.mailer!;
      expect(mailer.journal.filter((j) => j.jobId === staleSend!.job && j.token === staleSend!.token)).toEqual([]);
      expect(staleSend!.takenOverBy!.worker).not.toBe('w1');
      expect(staleSend!.takenOverBy!.token).toBeGreaterThan(staleSend!.token);
      expect(final.journal.filter((j) => j.jobId === staleSend!.job && j.token === staleSend!.token)).toEqual([]);
      expect(job(staleSend!.job)).toMatchObject({
        status: 'done',
        owner: staleSend!.takenOverBy!.worker,
        token: staleSend!.takenOverBy!.token,
      });

      // Frozen before the finish of a job it had sent: the finish is refused; the new owner's send
      // is a duplicate, and it finishes the job.
      expect(staleFinish).toMatchObject({
        worker: 'w1',
        before: 'finish',
        refusal: { op: 'finish', status: 409, code: 'stale_lease' },
      });
      expect(job(staleFinish!.job)).toMatchObject({ status: 'done', owner: staleFinish!.takenOverBy!.worker });
      const w1Finished = result.events
        .filter((e) => e.worker === 'w1' && e.event === 'finished')
        .map((e) => ('job' in e ? e.job : ''));
      expect(w1Finished).not.toContain(staleSend!.job);
      expect(w1Finished).not.toContain(staleFinish!.job);

      // Killed mid-job: someone else does its job, under a newer token.
      expect(kill).toBeDefined();
      const killed = job(kill!.job)!;
      expect(killed.status).toBe('done');
      expect(killed.owner).not.toBe(kill!.worker);
      expect(killed.token).toBeGreaterThan(kill!.token);

      // Every job exactly once in effect, and the total is the sum of the jobs' qty.
      const expectedQty = result.jobs.reduce((sum, j) => sum + j.qty, 0);
      expect(final.totals).toEqual({ effects: result.jobs.length, qty: expectedQty });
      expect(final.stats).toEqual({ pending: 0, leased: 0, done: result.jobs.length, dead: 0 });
      expect(final.effects.map((e) => e.jobId).sort()).toEqual(result.jobs.map((j) => j.id).sort());

      // Once per (downstream, job, key): one e-mail per job at the mailer, one row in its outbox.
      const ids = result.jobs.map((j) => j.id).sort();
      expect(mailer.effects.map((e) => [e.jobId, e.key])).toEqual(ids.map((id) => [id, 'email']));
      expect(mailer.mails.map((m) => m.jobId).sort()).toEqual(ids);
      expect(final.audit).toMatchObject({ ok: true, violations: [] });
      expect(final.audit!.counts.downstreams.map((d) => [d.name, d.effects])).toEqual([
        ['receiver', result.jobs.length],
        ['mailer', result.jobs.length],
      ]);
      // The stale finish's job: both effects were applied under w1's token before the takeover.
      expect(final.audit!.earlierTokens.filter((e) => e.jobId === staleFinish!.job).map((e) => e.downstream)).toEqual([
        'receiver',
        'mailer',
      ]);

      // Every process it started has exited.
      expect(result.processes.length).toBe(4 + 3);
      expect(result.processes.filter((p) => !gone(p.pid))).toEqual([]);
    },
  );

  test(
    'Ctrl-C in the middle of a freeze: every process is stopped, the frozen one included',
    { timeout: 60_000 },
    async () => {
      const child = spawn(process.execPath, [CLI, 'demo'], { stdio: ['ignore', 'pipe', 'pipe'] });
      const lines: string[] = [];
      let stderr = '';
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      const frozen = new Promise<void>((resolve) => {
        createInterface({ input: child.stdout }).on('line', (line) => {
          lines.push(line);
          if (/FREEZE w1/.test(line)) resolve();
        });
      });
      onTestFinished(({ task }) => {
        child.kill('SIGKILL');
        if (task.result?.state === 'fail') console.error(`demo output:\n${lines.join('\n')}\n${stderr}`);
      });

      await frozen;
      child.kill('SIGINT');
      const code = await exited;

      expect(code).toBe(130);
      const pids = lines.flatMap((l) => [...l.matchAll(/\(pid (\d+)\)/g)].map((m) => Number(m[1])));
      expect(pids.length).toBeGreaterThanOrEqual(5); // four services and the frozen worker
      expect(pids.filter((pid) => !gone(pid))).toEqual([]);
      expect(lines.join('\n')).toMatch(/FAIL after [\d.]+ s:\n {2}- interrupted/);
      const kept = /files kept in (\S+)/.exec(lines.join('\n'));
      expect(kept).not.toBeNull();
      rmSync(kept![1]!, { recursive: true, force: true });
    },
  );

  test('stdout closed by its reader (leasehold demo | head): every process stopped, no stack trace', async () => {
    const child = spawn(process.execPath, [CLI, 'demo'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
    onTestFinished(({ task }) => {
      child.kill('SIGKILL');
      if (task.result?.state === 'fail') console.error(`demo stderr:\n${stderr}`);
    });
    await new Promise((resolve) => child.stdout.once('data', resolve));
    child.stdout.destroy();
    const code = await exited;

    expect({ code, stackTrace: /EPIPE|Unhandled|\n\s+at /.test(stderr) }).toEqual({ code: 130, stackTrace: false });
    expect(stderr).toContain('leasehold demo: stdout closed: stopping every process\n');
    const kept = /leasehold demo: files kept in (\S+)/.exec(stderr);
    expect(kept).not.toBeNull();
    rmSync(kept![1]!, { recursive: true, force: true });
    rmSync(`${kept![1]!}.html`, { force: true });
  });
});
