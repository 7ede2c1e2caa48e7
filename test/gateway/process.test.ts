// The real `leasehold gateway` process in front of a real receiver process: the receiver killed
// with SIGKILL and restarted on the same port and database, the CLI's output, flags and signals.
// Run after `npm run build`.
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { QueueClient } from '../../queue/client.js';
import { startQueue } from '../../queue/service.js';
import { tempDir } from '../helpers/tmp.js';
import { portInUse, runCli, startProcess } from '../helpers/processes.js';
import { toyDownstream } from '../helpers/toy-downstream.js';
import { closeAfterTest } from './setup.js';

async function realQueue(dir: string) {
  const queue = await startQueue({ db: join(dir, 'queue.sqlite') });
  closeAfterTest(() => queue.close());
  const client = new QueueClient(queue.url);
  closeAfterTest(() => client.close());
  const lease = async (id: string, qty: number) => {
    await client.enqueue({ id, qty });
    const claimed = await client.claim('w1', 120_000);
    expect(claimed?.id).toBe(id);
    return claimed!;
  };
  return { url: queue.url, lease };
}

interface GatewayAnswer {
  outcome?: string;
  error?: { code: string; message: string };
}

async function post(url: string, body: unknown): Promise<{ status: number; body: GatewayAnswer }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as GatewayAnswer };
}

function logLines(stderr: string): Array<Record<string, unknown>> {
  return stderr
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

describe('leasehold gateway (process)', () => {
  test('receiver killed: a clear 5xx within the budget; restarted on the same port and db: the same send succeeds', async () => {
    const dir = tempDir('leasehold-gateway-proc-');
    const queue = await realQueue(dir);
    const receiverArgs = ['--db', join(dir, 'receiver.sqlite'), '--log-level', 'warn'];
    const receiver = await startProcess('receiver', ['--port', '0', ...receiverArgs]);
    const budgetMs = 5_000;
    const gateway = await startProcess('gateway', [
      '--port',
      '0',
      '--queue',
      queue.url,
      '--receiver',
      receiver.url,
      '--receiver-timeout-ms',
      '1000',
      '--retry-budget-ms',
      String(budgetMs),
    ]);
    expect(gateway.stdout()).toMatch(/^leasehold gateway listening on http:\/\/127\.0\.0\.1:\d+\n$/);
    expect((await fetch(`${gateway.url}/healthz`)).status).toBe(200);

    const a = await queue.lease('job-a', 3);
    const b = await queue.lease('job-b', 4);
    const sendA = { jobId: 'job-a', owner: 'w1', token: a.token, qty: 3 };
    const sendB = { jobId: 'job-b', owner: 'w1', token: b.token, qty: 4 };
    expect((await post(`${gateway.url}/send`, sendA)).body.outcome).toBe('applied');

    receiver.child.kill('SIGKILL');
    expect((await receiver.exited).signal).toBe('SIGKILL');
    const started = Date.now();
    const down = await post(`${gateway.url}/send`, sendB);
    const elapsed = Date.now() - started;
    expect({ status: down.status, code: down.body.error?.code }, JSON.stringify(down.body)).toEqual({
      status: 502,
      code: 'upstream_unavailable',
    });
    expect(down.body.error?.message).toContain('refused the connection');
    expect(elapsed).toBeLessThan(budgetMs + 3_000);

    const port = new URL(receiver.url).port;
    const again = await startProcess('receiver', ['--port', port, ...receiverArgs]);
    expect(again.url).toBe(receiver.url);
    const up = await post(`${gateway.url}/send`, sendB);
    expect({ status: up.status, outcome: up.body.outcome }, JSON.stringify(up.body)).toEqual({
      status: 200,
      outcome: 'applied',
    });
    // The effect applied before the kill survived it: resending it is a duplicate.
    expect((await post(`${gateway.url}/send`, sendA)).body.outcome).toBe('duplicate');
    const effects = (await (await fetch(`${again.url}/effects`)).json()) as { effects: Array<{ jobId: string }> };
    expect(effects.effects.map((e) => e.jobId).sort()).toEqual(['job-a', 'job-b']);

    gateway.child.kill('SIGTERM');
    expect(await gateway.exited).toEqual({ code: 0, signal: null });
    const logs = logLines(gateway.stderr());
    const forwarded = logs.filter((l) => l.msg === 'forwarded');
    expect(forwarded.map((l) => [l.jobId, l.outcome, l.attempts])).toEqual([
      ['job-a', 'applied', 1],
      ['job-b', 'applied', 1],
      ['job-a', 'duplicate', 1],
    ]);
    for (const line of forwarded) expect(line).toEqual(expect.objectContaining({ token: 1, ms: expect.any(Number) }));
    expect(logs.find((l) => l.outcome === 'upstream_unavailable')).toMatchObject({
      jobId: 'job-b',
      status: 502,
      attempts: 3,
    });
    expect(gateway.stdout().trim().split('\n')).toHaveLength(1);
  });

  test('LEASEHOLD_SECRET signs the forwarded requests; SIGINT stops the gateway cleanly', async () => {
    const dir = tempDir('leasehold-gateway-proc-');
    const queue = await realQueue(dir);
    const env = { LEASEHOLD_SECRET: 'shared-secret' };
    const receiver = await startProcess(
      'receiver',
      ['--port', '0', '--db', join(dir, 'receiver.sqlite'), '--log-level', 'warn'],
      env,
    );
    const gateway = await startProcess(
      'gateway',
      ['--port', '0', '--queue', queue.url, '--receiver', receiver.url],
      env,
    );
    const lease = await queue.lease('job-a', 3);
    const res = await post(`${gateway.url}/send`, { jobId: 'job-a', owner: 'w1', token: lease.token, qty: 3 });
    expect({ status: res.status, outcome: res.body.outcome }, JSON.stringify(res.body)).toEqual({
      status: 200,
      outcome: 'applied',
    });
    expect(logLines(gateway.stderr()).find((l) => l.msg === 'gateway ready')).toMatchObject({ signed: true });
    expect(gateway.stderr()).not.toContain('shared-secret');

    gateway.child.kill('SIGINT');
    expect(await gateway.exited).toEqual({ code: 0, signal: null });
  });

  test('LEASEHOLD_DOWNSTREAMS and LEASEHOLD_SECRET_<NAME>: each downstream gets its own signature; --downstream beats the variable', async () => {
    const dir = tempDir('leasehold-gateway-proc-');
    const queue = await realQueue(dir);
    const billing = await toyDownstream({ path: '/hooks/effects', secret: 'billing-secret' });
    const mail = await toyDownstream({ secret: 'shared-secret' });
    const ignored = await toyDownstream();
    const env = {
      LEASEHOLD_DOWNSTREAMS: `billing=${billing.url},mail=${ignored.url}`,
      LEASEHOLD_SECRET_BILLING: 'billing-secret',
      LEASEHOLD_SECRET: 'shared-secret',
    };
    // Given on the command line, --downstream replaces the variable's whole list.
    const fromFlags = await startProcess(
      'gateway',
      [
        '--port',
        '0',
        '--queue',
        queue.url,
        '--downstream',
        `billing=${billing.url}`,
        '--downstream',
        `mail=${mail.url}`,
      ],
      env,
    );
    const lease = await queue.lease('job-a', 3);
    const who = { jobId: 'job-a', owner: 'w1', token: lease.token };
    for (const to of ['billing', 'mail']) {
      const res = await post(`${fromFlags.url}/send`, { ...who, to, key: 'k', body: { to } });
      expect({ to, status: res.status, outcome: res.body.outcome }, JSON.stringify(res.body)).toEqual({
        to,
        status: 200,
        outcome: 'applied',
      });
    }
    expect([billing.applied.length, mail.applied.length, ignored.requests.length]).toEqual([1, 1, 0]);

    const fromVariables = await startProcess('gateway', ['--port', '0', '--queue', queue.url], env);
    const res = await post(`${fromVariables.url}/send`, { ...who, to: 'mail', key: 'k2', qty: 1 });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(ignored.applied).toHaveLength(1);
    expect(logLines(fromVariables.stderr()).find((l) => l.msg === 'gateway ready')).toMatchObject({
      downstreams: { billing: billing.url, mail: ignored.url },
    });
    expect(fromVariables.stderr()).not.toContain('billing-secret');
  });

  test('--help explains every flag', async () => {
    const { code, stdout } = await runCli(['gateway', '--help']);
    expect(code).toBe(0);
    for (const flag of [
      '--port',
      '--host',
      '--queue',
      '--receiver',
      '--secret',
      'LEASEHOLD_SECRET',
      '--downstream',
      'LEASEHOLD_DOWNSTREAMS',
      '--downstream-secret',
      'LEASEHOLD_SECRET_<NAME>',
      '--receiver-timeout-ms',
      '--queue-timeout-ms',
      '--retry-attempts',
      '--retry-budget-ms',
      '--log-level',
      'LEASEHOLD_PORT',
      'LEASEHOLD_RECEIVER_TIMEOUT_MS',
    ]) {
      expect(stdout, flag).toContain(flag);
    }
  });

  test.each([
    [['--port', 'x'], '--port'],
    [['--retry-attempts', '0'], 'positive integer'],
    [
      ['--receiver-timeout-ms', '5000', '--retry-budget-ms', '1000'],
      '--retry-budget-ms (1000) must be at least --receiver-timeout-ms (5000)',
    ],
    [['--queue', 'ftp://example'], '--queue must be an http:// URL'],
    [['--secret', ''], 'the secret is empty'],
    [['--downstream', 'billing'], '--downstream: must be NAME=URL, not "billing"'],
    [['--downstream', '9x=http://127.0.0.1:1/e'], "a downstream's name must be a letter"],
    [['--downstream', 'billing=ftp://x/e'], '--downstream billing must be an http:// URL'],
    [['--downstream', 'a=http://x/e', '--downstream', 'a=http://y/e'], 'names "a" twice'],
    [['--downstream-secret', 'billing=s'], '--downstream-secret names "billing", which is not a downstream'],
    [['--downstream', 'receiver=http://x/e', '--receiver', 'http://y'], 'give one of them'],
  ])('bad flags %j: one line that says what is wrong, exit code 2', async (args, phrase) => {
    const { code, stdout, stderr } = await runCli(['gateway', ...args]);
    expect({ code, stdout }).toEqual({ code: 2, stdout: '' });
    expect(stderr).toMatch(/^leasehold gateway: [^\n]+\n$/);
    expect(stderr).toContain(phrase);
  });

  test.each([
    [{ LEASEHOLD_DOWNSTREAMS: 'billing' }, 'LEASEHOLD_DOWNSTREAMS: must be NAME=URL, not "billing"'],
    [{ LEASEHOLD_DOWNSTREAMS: 'billing=ftp://x/e' }, 'billing in LEASEHOLD_DOWNSTREAMS must be an http:// URL'],
    [{ LEASEHOLD_DOWNSTREAM: 'a=http://x/e,a=http://y/e' }, 'LEASEHOLD_DOWNSTREAM names "a" twice'],
    [
      { LEASEHOLD_DOWNSTREAMS: 'receiver=http://x/e', LEASEHOLD_RECEIVER: 'http://y' },
      `LEASEHOLD_RECEIVER and LEASEHOLD_DOWNSTREAMS's receiver=URL both name the downstream "receiver"`,
    ],
    [
      { LEASEHOLD_DOWNSTREAM_SECRET: 'billing=s' },
      'LEASEHOLD_DOWNSTREAM_SECRET names "billing", which is not a downstream',
    ],
  ])('bad variables %j: the line names the variable, not the flag it stands in for', async (env, phrase) => {
    const { code, stdout, stderr } = await runCli(['gateway'], env);
    expect({ code, stdout }).toEqual({ code: 2, stdout: '' });
    expect(stderr).toMatch(/^leasehold gateway: [^\n]+\n$/);
    expect(stderr).toContain(phrase);
  });

  test('reads LEASEHOLD_PORT and LEASEHOLD_QUEUE; --port beats LEASEHOLD_PORT; a port in use exits 1', async () => {
    const busy = await portInUse();
    const env = { LEASEHOLD_PORT: String(busy), LEASEHOLD_QUEUE: 'http://127.0.0.1:4999' };
    const gateway = await startProcess('gateway', ['--port', '0'], env);
    expect(new URL(gateway.url).port).not.toBe(String(busy));
    expect(logLines(gateway.stderr()).find((l) => l.msg === 'gateway ready')).toMatchObject({
      service: 'gateway',
      queue: 'http://127.0.0.1:4999',
    });

    const { code, stderr } = await runCli(['gateway'], env);
    expect({ code, stderr }).toEqual({
      code: 1,
      stderr: `leasehold gateway: port ${busy} is in use; pick another with --port, or --port 0 for a free one\n`,
    });
  });

  // Node sends a URL's user:pass@ as Basic authentication: a secret, kept out of the log.
  test("the ready line masks the password of a peer's URL", async () => {
    const gateway = await startProcess('gateway', [
      '--port',
      '0',
      '--queue',
      'http://ops:queue-pass@127.0.0.1:4999',
      '--downstream',
      'billing=http://ops:billing-pass@127.0.0.1:5999/effects',
    ]);
    const ready = logLines(gateway.stderr()).find((l) => l.msg === 'gateway ready');
    expect(ready).toMatchObject({
      queue: 'http://ops:***@127.0.0.1:4999/',
      downstreams: { billing: 'http://ops:***@127.0.0.1:5999/effects' },
    });
    expect(gateway.stderr()).not.toMatch(/queue-pass|billing-pass/);
  });
});
