// The typed client against a real queue service on 127.0.0.1: answers and errors round-trip,
// and each call can be cancelled or given its own timeout.
import { afterEach, expect, onTestFinished, test } from 'vitest';
import type http from 'node:http';
import { getEventListeners } from 'node:events';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { keepAliveAgent } from '../../platform/exchange.js';
import { QueueClient, QueueError, startQueue, type QueueService } from '../../queue/index.js';
import { holdWriteLock } from '../helpers/sqlite-lock.js';
import { collectWarnings } from '../helpers/warnings.js';
import { tempDir } from '../helpers/tmp.js';

const services: QueueService[] = [];
const clients: QueueClient[] = [];
afterEach(async () => {
  clients.splice(0).forEach((c) => c.close());
  await Promise.all(services.splice(0).map((s) => s.close()));
});

async function setup() {
  const db = join(tempDir('leasehold-client-'), 'q.sqlite');
  const service = await startQueue({ db, port: 0 });
  services.push(service);
  const client = new QueueClient(service.url);
  clients.push(client);
  return { service, client, db };
}

/** A client on an agent the test can look into, to see which connections it holds. */
function clientWithAgent(url: string): { client: QueueClient; agent: http.Agent } {
  const agent = keepAliveAgent();
  onTestFinished(() => agent.destroy());
  const client = new QueueClient(url, { agent });
  return { client, agent };
}

function socketCount(agent: http.Agent): number {
  const count = (sockets: NodeJS.ReadOnlyDict<unknown[]>) =>
    Object.values(sockets).reduce((n, list) => n + (list?.length ?? 0), 0);
  return count(agent.sockets) + count(agent.freeSockets) + count(agent.requests);
}

/** Resolves once `promise` settles, however it settles, and tells whether it had by then. */
function tracked(promise: Promise<unknown>): { settled: () => boolean } {
  let settled = false;
  promise.then(
    () => (settled = true),
    () => (settled = true),
  );
  return { settled: () => settled };
}

test('a full cycle through the client', async () => {
  const { client } = await setup();
  expect((await client.enqueue({ id: 'a', qty: 2 })).created).toBe(true);
  expect((await client.enqueue({ id: 'a', qty: 2 })).created).toBe(false);
  const lease = await client.claim('w1', 5_000);
  expect(lease).toMatchObject({ id: 'a', owner: 'w1', token: 1 });
  expect(await client.claim('w2')).toBeNull();
  await client.heartbeat('a', { owner: 'w1', token: 1 });
  expect((await client.verify('a', { owner: 'w1', token: 1 })).token).toBe(1);
  expect((await client.finish('a', { owner: 'w1', token: 1, result: 'ok' })).status).toBe('done');
  expect(await client.stats()).toEqual({ pending: 0, leased: 0, done: 1, dead: 0 });
  expect(await client.healthy()).toBe(true);
});

test('refusals come back as the same QueueError with their details', async () => {
  const { client } = await setup();
  await client.enqueue({ id: 'a', qty: 1 });
  await client.claim('w1', 5_000);
  const err = await client.finish('a', { owner: 'w1', token: 7 }).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(QueueError);
  expect(err).toMatchObject({
    code: 'stale_lease',
    status: 409,
    details: { reason: 'token_mismatch', expected: { token: 7 } },
  });
  expect(await client.get('nope').catch((e: QueueError) => e.code)).toBe('unknown_job');
});

test('ids are sent as one path segment, and a base URL with a path keeps it', async () => {
  const { service, client } = await setup();
  const id = 'a/b c?d#e';
  await client.enqueue({ id, qty: 1 });
  expect((await client.get(id)).id).toBe(id);
  expect((await client.list({ status: 'pending', limit: 5 })).map((job) => job.id)).toEqual([id]);
  const prefixed = new QueueClient(`${service.url}/prefix/`);
  clients.push(prefixed);
  // The queue has no /prefix routes, so its 404 shows where the request went.
  const err = await prefixed.stats().catch((e: unknown) => e);
  expect(err).toMatchObject({ code: 'not_found', status: 404 });
  expect((err as QueueError).message).toContain('GET /prefix/stats');
});

test("an unreachable queue is queue_unavailable; a body that is not JSON is the caller's TypeError", async () => {
  const { service, client } = await setup();
  const bad = client.finish('a', { owner: 'w1', token: 1, result: 10n });
  await expect(bad).rejects.toBeInstanceOf(TypeError);
  const url = service.url;
  await service.close();
  services.splice(0);
  const gone = new QueueClient(url, { timeoutMs: 2_000 });
  clients.push(gone);
  const err = await gone.claim('w1').catch((e: unknown) => e);
  expect(err).toMatchObject({ code: 'queue_unavailable', status: 503 });
  expect(await gone.healthy()).toBe(false);
});

test("aborting a call in flight rejects it at once with the signal's reason, and drops its connection", async () => {
  const { service, client: plain, db } = await setup();
  const { client, agent } = clientWithAgent(service.url);
  await client.enqueue({ id: 'a', qty: 1 });
  expect(socketCount(agent), 'the enqueue left one kept-alive connection').toBe(1);
  const release = await holdWriteLock(db);

  const controller = new AbortController();
  const reason = new Error('the worker is shutting down');
  const claim = client.claim('w1', 60_000, { signal: controller.signal });
  const claimState = tracked(claim);
  // Long enough for the request to reach the queue, whose claim then waits for the write lock.
  await sleep(200);
  expect(claimState.settled(), 'the claim is still waiting for the held write lock').toBe(false);
  const abortedAt = performance.now();
  controller.abort(reason);
  const err = await claim.catch((e: unknown) => e);
  const tookMs = performance.now() - abortedAt;

  expect(err, "rejected with the signal's reason itself, not a QueueError").toBe(reason);
  expect(tookMs, "ms from abort to rejection (the client's timeout is 10 s)").toBeLessThan(500);
  for (let waited = 0; socketCount(agent) > 0 && waited < 2_000; waited += 10) await sleep(10);
  expect(socketCount(agent), "the aborted call's connection is closed, not pooled").toBe(0);

  await release();
  // Writes are answered in arrival order: once this enqueue is, the aborted claim has been settled too.
  await plain.enqueue({ id: 'b', qty: 1 });
  const job = await plain.get('a');
  const seen = job.status === 'pending' ? 'pending' : `${job.status} by ${job.owner} token ${job.token}`;
  expect(['pending', 'leased by w1 token 1'], 'an aborted claim may or may not have been applied').toContain(seen);
  expect(await client.claim('w2', 60_000), 'the same client works after the abort').toMatchObject({
    id: 'b',
    owner: 'w2',
  });
});

test('an already-aborted signal rejects every call without sending anything', async () => {
  const { service, client: plain } = await setup();
  await plain.enqueue({ id: 'a', qty: 1 });
  const before = await plain.stats();
  const { client, agent } = clientWithAgent(service.url);
  const reason = new Error('gave up before calling');
  const signal = AbortSignal.abort(reason);

  await expect(client.claim('w1', 60_000, { signal })).rejects.toBe(reason);
  await expect(client.enqueue({ id: 'b', qty: 1 }, { signal })).rejects.toBe(reason);
  await expect(client.finish('a', { owner: 'w1', token: 1 }, { signal })).rejects.toBe(reason);
  await expect(client.healthy({ signal }), 'healthy rejects too instead of answering false').rejects.toBe(reason);
  const noReason = await client.stats({ signal: AbortSignal.abort() }).catch((e: unknown) => e);
  expect(noReason).toBeInstanceOf(DOMException);
  expect(noReason).toMatchObject({ name: 'AbortError' });

  expect(socketCount(agent), 'no connection was opened').toBe(0);
  expect(await plain.get('a')).toMatchObject({ status: 'pending', token: 0, attempts: 0 });
  expect(await plain.get('b').catch((e: QueueError) => e.code)).toBe('unknown_job');
  expect(await plain.stats()).toEqual(before);
});

test("a per-call timeoutMs overrides the client's: queue_unavailable saying it timed out", async () => {
  const { client, db } = await setup();
  await client.enqueue({ id: 'a', qty: 1 });
  const release = await holdWriteLock(db);

  const startedAt = performance.now();
  const err = await client.claim('w1', 60_000, { timeoutMs: 300 }).catch((e: unknown) => e);
  const tookMs = performance.now() - startedAt;
  await release();

  expect(err).toBeInstanceOf(QueueError);
  expect(err).toMatchObject({ code: 'queue_unavailable', status: 503 });
  expect((err as QueueError).message).toContain('did not answer within 300 ms (timed out)');
  expect(tookMs, "ms until the timeout (the client's own is 10 s)").toBeGreaterThanOrEqual(290);
  expect(tookMs).toBeLessThan(3_000);
  expect(await client.healthy({ timeoutMs: 5_000 })).toBe(true);
  await expect(client.stats({ timeoutMs: 0 })).rejects.toBeInstanceOf(RangeError);
  await expect(client.stats({ timeoutMs: Infinity })).rejects.toBeInstanceOf(RangeError);
});

test('one signal passed to many calls leaves no listener behind and no MaxListenersExceededWarning', async () => {
  const { client } = await setup();
  const warnings = collectWarnings('MaxListenersExceededWarning');
  const controller = new AbortController();
  const { signal } = controller;

  for (let i = 0; i < 12; i += 1) {
    await client.enqueue({ id: `j${i}`, qty: 1 }, { signal });
    const lease = await client.claim('w1', 60_000, { signal });
    if (!lease) throw new Error(`expected w1 to claim job j${i}`);
    const fence = { owner: lease.owner, token: lease.token };
    await client.heartbeat(lease.id, fence, { signal });
    await client.finish(lease.id, fence, { signal });
    // A refusal settles the call too, and must let go of the signal as well.
    const refused = await client.finish(lease.id, fence, { signal }).catch((e: QueueError) => e.code);
    expect(refused).toBe('stale_lease');
  }
  expect(await client.list({ status: 'done' }, { signal })).toHaveLength(12);
  // Warnings are emitted on a later tick.
  await new Promise((resolve) => setImmediate(resolve));

  expect(getEventListeners(signal, 'abort'), 'abort listeners left on the signal after 61 calls').toHaveLength(0);
  expect(warnings).toEqual([]);
  expect(await client.stats({ signal })).toEqual({ pending: 0, leased: 0, done: 12, dead: 0 });
  controller.abort(new Error('done with this signal'));
  await expect(client.healthy({ signal })).rejects.toThrow('done with this signal');
  expect(await client.healthy()).toBe(true);
});

test('claimMany, a long-polling claim, finishAndClaim and verifyMany over a real server', async () => {
  const { client } = await setup();
  for (const id of ['m1', 'm2', 'm3']) await client.enqueue({ id, qty: 1 });
  const leases = await client.claimMany('w1', { max: 2, leaseMs: 60_000 });
  expect(leases.map((l) => l.id)).toEqual(['m1', 'm2']);
  const { job, next } = await client.finishAndClaim('m1', { owner: 'w1', token: leases[0]!.token, result: 'ok' });
  expect(job).toMatchObject({ id: 'm1', status: 'done' });
  expect(next).toMatchObject({ id: 'm3', owner: 'w1' });
  const checks = await client.verifyMany([
    { id: 'm2', owner: 'w1', token: leases[1]!.token },
    { id: 'm1', owner: 'w1', token: leases[0]!.token },
  ]);
  expect(checks[0]).toEqual(leases[1]);
  expect(checks[1]).toBeInstanceOf(QueueError);
  expect((checks[1] as QueueError).details).toMatchObject({ reason: 'not_leased' });

  // The wait counts on top of the client's timeout: a 1 s client still waits out a 1.5 s poll.
  const short = new QueueClient(client.baseUrl.href, { timeoutMs: 1_000 });
  clients.push(short);
  const started = Date.now();
  const waiting = short.claimMany('w2', { max: 1, waitMs: 1_500 });
  await sleep(300);
  await client.enqueue({ id: 'm4', qty: 1 });
  expect((await waiting).map((l) => l.id)).toEqual(['m4']);
  expect(await short.claimMany('w2', { max: 1, waitMs: 1_200 })).toEqual([]);
  expect(Date.now() - started, 'ms spent in the two long polls').toBeGreaterThanOrEqual(1_200);
});

test('closing the service answers a waiting claim at once instead of holding the close up', async () => {
  const { service, client } = await setup();
  const waiting = client.claimMany('w1', { max: 1, waitMs: 25_000 });
  await sleep(200);
  const started = Date.now();
  await service.close();
  services.splice(services.indexOf(service), 1);
  expect(await waiting).toEqual([]);
  expect(Date.now() - started, 'ms to close with a claim waiting').toBeLessThan(10_000);
});

test('release, cancel and retry through the client; their refusals come back as QueueErrors', async () => {
  const { client } = await setup();
  await client.enqueue({ id: 'life', qty: 1 });
  const first = (await client.claim('w1', 60_000))!;
  expect(await client.release('life', { owner: 'w1', token: first.token })).toMatchObject({
    status: 'pending',
    attempts: 0,
    token: 1,
  });
  const second = (await client.claim('w2', 60_000))!;
  expect(second.token).toBe(2);
  const stale = await client.release('life', { owner: 'w1', token: first.token }).catch((e: unknown) => e);
  expect(stale).toMatchObject({ code: 'stale_lease', details: { reason: 'token_mismatch' } });

  const cancelled = await client.cancel('life', { reason: 'no longer needed' });
  expect(cancelled).toMatchObject({ status: 'dead', deadReason: 'cancelled', lastError: 'no longer needed' });
  expect(await client.cancel('life')).toEqual(cancelled);
  const refused = await client.heartbeat('life', { owner: 'w2', token: second.token }).catch((e: unknown) => e);
  expect(refused).toMatchObject({ code: 'stale_lease', details: { reason: 'not_leased' } });
  expect((await client.list({ status: 'dead' })).map((j) => [j.id, j.deadReason])).toEqual([['life', 'cancelled']]);

  expect(await client.retry('life', { maxAttempts: 2 })).toMatchObject({
    status: 'pending',
    attempts: 0,
    maxAttempts: 2,
  });
  expect(await client.retry('life').catch((e: QueueError) => [e.code, e.status])).toEqual(['not_dead', 409]);
  const third = (await client.claim('w3', 60_000))!;
  expect(third.token, 'the token keeps counting after a retry').toBe(3);
  await client.finish('life', { owner: 'w3', token: third.token });
  expect(await client.cancel('life').catch((e: QueueError) => [e.code, e.status])).toEqual(['job_finished', 409]);
});
