// The demo's mailer, a downstream on fencedEffects: it keeps the downstream protocol (the
// conformance suite, signatures included), writes one outbox row per effect it applies, and
// lists its effects and journal as the receiver does, page by page.
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { conform, formatCase } from '../../conform/index.js';
import { startMailer, type Mail } from '../../demo/mailer.js';
import { ReceiverClient } from '../../receiver/index.js';
import { closeAfterTest } from '../gateway/setup.js';
import { tempDir } from '../helpers/tmp.js';

async function setup(secret?: string) {
  const db = join(tempDir('leasehold-mailer-'), 'mailer.sqlite');
  const mailer = await startMailer({ db, ...(secret ? { secret } : {}) });
  closeAfterTest(() => mailer.close());
  const client = new ReceiverClient(mailer.url);
  closeAfterTest(() => client.close());
  const outbox = async () => ((await (await fetch(`${mailer.url}/outbox`)).json()) as { mails: Mail[] }).mails;
  return { mailer, client, outbox, db };
}

test('keeps the downstream protocol: every conformance case passes, signatures included', async () => {
  const { mailer } = await setup('mailer-secret');
  const report = await conform({ url: `${mailer.url}/effects`, secret: 'mailer-secret' });
  expect(report.failed, report.cases.map(formatCase).join('\n')).toBe(0);
  expect(report.passed).toBeGreaterThan(0);
});

test('one outbox row per applied effect, none for a duplicate, a fenced or a conflicting request', async () => {
  const { client, outbox } = await setup();
  const email = { jobId: 'job-1', key: 'email', body: { to: 'a@example.com', subject: 'job-1 shipped' } };
  expect((await client.record(email, { token: 1 })).outcome).toBe('applied');
  expect((await client.record(email, { token: 2 })).outcome).toBe('duplicate');
  await expect(client.record(email, { token: 1 })).rejects.toMatchObject({ code: 'fenced' });
  await expect(client.record({ ...email, body: { to: 'b@example.com' } }, { token: 2 })).rejects.toMatchObject({
    code: 'conflict',
  });
  expect(await outbox()).toEqual([
    {
      jobId: 'job-1',
      key: 'email',
      to: 'a@example.com',
      subject: 'job-1 shipped',
      token: 1,
      sentAt: expect.any(Number),
    },
  ]);
  expect((await client.journal()).map((j) => [j.token, j.outcome])).toEqual([
    [1, 'applied'],
    [2, 'duplicate'],
    [1, 'fenced'],
    [2, 'conflict'],
  ]);
});

test('effects and journal listed page by page as the receiver lists them; a bad query is 400', async () => {
  const { mailer, client } = await setup();
  for (const jobId of ['a', 'b', 'c']) {
    await client.record({ jobId, key: 'email', body: { subject: jobId } }, { token: 1 });
    await client.record({ jobId, qty: 1 }, { token: 1 });
  }
  const first = await client.effectsPage({ limit: 4 });
  expect(first.effects.map((e) => [e.jobId, e.key ?? null])).toEqual([
    ['a', null],
    ['a', 'email'],
    ['b', null],
    ['b', 'email'],
  ]);
  expect(first.next).not.toBeNull();
  const second = await client.effectsPage({ limit: 4, after: first.next! });
  expect(second).toEqual({ effects: [expect.objectContaining({ jobId: 'c' }), expect.anything()], next: null });
  expect((await client.effects()).length).toBe(6);
  expect((await client.effects({ jobId: 'b' })).map((e) => e.key ?? null)).toEqual([null, 'email']);
  expect((await client.journalPage({ limit: 5 })).next).toBe(5);
  expect((await client.journal()).length).toBe(6);
  expect(await client.totals()).toEqual({ effects: 6, qty: 3 });

  const bad = await fetch(`${mailer.url}/effects?limit=0`);
  expect(bad.status).toBe(400);
  expect(await bad.json()).toMatchObject({ error: { code: 'invalid_request' } });
  const unknown = await fetch(`${mailer.url}/nowhere`);
  expect(unknown.status).toBe(404);
});
