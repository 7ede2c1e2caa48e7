// `leasehold audit` against real queue and receiver processes: exit 0 and what it checked when
// clean, exit 1 with each violation's job and both sides' values, exit 2 on a usage error.
import { expect, test } from 'vitest';
import { QueueClient } from '../../queue/index.js';
import { ReceiverClient } from '../../receiver/index.js';
import { runCli, startProcess } from '../helpers/processes.js';
import { tempDir } from '../helpers/tmp.js';

test('leasehold audit: 0 when clean, 1 with each violation, 2 on a usage error', async () => {
  const dir = tempDir('leasehold-audit-cli-');
  const queue = await startProcess('queue', ['--port', '0', '--db', `${dir}/queue.sqlite`, '--log-level', 'warn']);
  const receiver = await startProcess('receiver', [
    '--port',
    '0',
    '--db',
    `${dir}/receiver.sqlite`,
    '--log-level',
    'warn',
  ]);
  const jobs = new QueueClient(queue.url);
  const effects = new ReceiverClient(receiver.url);
  try {
    for (const [id, qty] of [
      ['a', 2],
      ['b', 5],
    ] as const) {
      await jobs.enqueue({ id, qty });
      const lease = (await jobs.claim('w1'))!;
      await effects.record({ jobId: id, qty }, { token: lease.token });
      await jobs.finish(id, { owner: 'w1', token: lease.token });
    }
    const clean = await runCli(['audit', '--queue', queue.url, '--receiver', receiver.url]);
    expect(clean.code, clean.stderr).toBe(0);
    expect(clean.stdout).toContain('audited 2 jobs (2 done) in the queue against 2 effects in the receiver');
    expect(clean.stdout).toContain(
      'checked: every done job has exactly one effect for each key expected of it, the default effect with its qty',
    );
    expect(clean.stdout.trim().split('\n').at(-1)).toBe('ok: every done job took effect exactly once, with its qty');

    await effects.record({ jobId: 'ghost', qty: 4 }, { token: 3 });
    const dirty = await runCli(['audit', '--queue', queue.url, '--receiver', receiver.url]);
    expect(dirty.code).toBe(1);
    expect(dirty.stdout).toMatch(/VIOLATION unknown_job: .*"ghost".* receiver \{"qty":4,"token":3\}/);
    expect(dirty.stdout.trim().split('\n').at(-1)).toBe('FAIL: 1 violation');
    const json = await runCli(['audit', '--json'], { LEASEHOLD_QUEUE: queue.url, LEASEHOLD_RECEIVER: receiver.url });
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout)).toMatchObject({ ok: false, violations: [{ rule: 'unknown_job', jobId: 'ghost' }] });

    const usage = await runCli(['audit', '--queue', 'ftp://example', '--receiver', receiver.url]);
    expect(usage.code).toBe(2);
    expect(usage.stderr.trim()).toMatch(/^leasehold audit: --queue must be an http:\/\/ URL/);
    const unreachable = await runCli(['audit', '--queue', 'http://127.0.0.1:1', '--receiver', receiver.url]);
    expect(unreachable.code).toBe(1);
    expect(unreachable.stderr.trim().split('\n')).toHaveLength(1);
  } finally {
    jobs.close();
    effects.close();
  }
});

test('leasehold audit --downstream --expect: each downstream per key', async () => {
  const dir = tempDir('leasehold-audit-downstreams-');
  const quiet = ['--port', '0', '--log-level', 'warn'];
  const [queue, receiver, mailer] = await Promise.all([
    startProcess('queue', [...quiet, '--db', `${dir}/queue.sqlite`]),
    startProcess('receiver', [...quiet, '--db', `${dir}/receiver.sqlite`]),
    // Another receiver stands for a downstream of the user's own: it lists its effects under /effects.
    startProcess('receiver', [...quiet, '--db', `${dir}/mailer.sqlite`]),
  ]);
  const jobs = new QueueClient(queue.url);
  const effects = new ReceiverClient(receiver.url);
  const mails = new ReceiverClient(mailer.url);
  try {
    const email = (jobId: string) => ({ jobId, key: 'email', body: { to: 'a@example.com', subject: jobId } });
    for (const id of ['a', 'b', 'c']) {
      await jobs.enqueue({ id, qty: 2 });
      const lease = (await jobs.claim('w1'))!;
      await effects.record({ jobId: id, qty: 2 }, { token: lease.token });
      if (id !== 'c') await mails.record(email(id), { token: lease.token });
      await jobs.finish(id, { owner: 'w1', token: lease.token });
    }
    const args = ['audit', '--queue', queue.url, '--receiver', receiver.url];
    const mailerFlag = ['--downstream', `mailer=${mailer.url}/effects`];

    const dirty = await runCli([...args, ...mailerFlag, '--expect', 'mailer=email']);
    expect(dirty.code, dirty.stderr).toBe(1);
    expect(dirty.stdout).toContain('  and against 2 effects at "mailer"');
    expect(dirty.stdout).toContain('  "mailer": effects by key: "email" 2 (expected of each done job: "email")');
    expect(dirty.stdout).toMatch(
      /VIOLATION missing_effect: job "c" is done \(qty 2, token 1\) but downstream "mailer" has no effect "email" for it — queue \{.*\}, mailer \{"effects":0\}/,
    );
    expect(dirty.stdout.trim().split('\n').at(-1)).toBe('FAIL: 1 violation');

    await mails.record(email('c'), { token: 1 });
    const clean = await runCli([...args, '--expect', 'mailer=email', '--json'], {
      LEASEHOLD_DOWNSTREAMS: `mailer=${mailer.url}/effects`,
    });
    expect(clean.code, clean.stderr).toBe(0);
    expect(JSON.parse(clean.stdout)).toMatchObject({
      ok: true,
      counts: {
        downstreams: [
          { name: 'receiver', effects: 3 },
          { name: 'mailer', effects: 3, byKey: { email: 3 } },
        ],
      },
    });

    const notEffects = await runCli([...args, '--downstream', `mailer=${mailer.url}`]);
    expect(notEffects.code).toBe(2);
    expect(notEffects.stderr).toMatch(
      /^leasehold audit: .*mailer's URL must be its effect endpoint ending in \/effects/,
    );
    const unknown = await runCli([...args, ...mailerFlag, '--expect', 'billing=charge']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(
      /--expect names "billing", which is not a downstream given with --downstream \(mailer\)/,
    );
  } finally {
    jobs.close();
    effects.close();
    mails.close();
  }
});
