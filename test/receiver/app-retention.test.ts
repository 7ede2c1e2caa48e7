// Journal retention through startReceiver's `retainJournalMs`: old journal entries are pruned at
// start and then periodically, while effects and highest tokens stay, so fencing is unchanged;
// on by default (30 days) where the database outlives the process, so replays cannot grow it for good.
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { startReceiver } from '../../receiver/index.js';
import { DEFAULT_RETAIN_JOURNAL_MS } from '../../receiver/service.js';
import { signatureHeader } from '../../receiver/signature.js';
import { pruneIntervalMs } from '../../receiver/retention.js';
import { fakeClock } from '../helpers/clock.js';
import { tempDir } from '../helpers/tmp.js';
import { capturedLogger, closeAfterTest, expectError, postEffect, until } from './setup.js';

describe('startReceiver with retainJournalMs', () => {
  test('prunes old journal entries periodically; effects and highest tokens stay, so a stale token is still fenced', async () => {
    const clock = fakeClock(1_000_000);
    const { logger, lines } = capturedLogger();
    const receiver = await startReceiver({ retainJournalMs: 1_000, clock, logger });
    closeAfterTest(() => receiver.close());
    expect((await postEffect(receiver.url, { jobId: 'a', qty: 3, token: 1 })).status).toBe(201);
    expect((await postEffect(receiver.url, { jobId: 'a', qty: 3, token: 4 })).status).toBe(200);
    clock.advance(1_001);
    await until('the journal is pruned', async () => (await receiver.journal()).length === 0, 10_000);
    expect(lines.some((line) => line.msg === 'journal pruned' && line.pruned === 2)).toBe(true);
    expect(await receiver.effects()).toEqual([{ jobId: 'a', qty: 3, token: 1, appliedAt: 1_000_000 }]);
    const stale = await postEffect(receiver.url, { jobId: 'a', qty: 3, token: 3 });
    expectError(stale, 409, 'fenced');
    expect(stale.body.error.highestToken).toBe(4);
    expect((await receiver.journal()).map((entry) => entry.outcome)).toEqual(['fenced']);
  });

  test('prunes at start what is already older than the retention', async () => {
    const db = join(tempDir('leasehold-retention-'), 'receiver.sqlite');
    const clock = fakeClock(1_000_000);
    const first = await startReceiver({ db, clock });
    await postEffect(first.url, { jobId: 'old', qty: 1, token: 1 });
    await first.close();

    clock.advance(7 * 24 * 3_600_000);
    const second = await startReceiver({ db, clock, retainJournalMs: 24 * 3_600_000 });
    closeAfterTest(() => second.close());
    await until('the journal is pruned at start', async () => (await second.journal()).length === 0, 5_000);
    expect(await second.effects()).toMatchObject([{ jobId: 'old', token: 1 }]);
  });

  test('replays of one signed request add a journal entry each and change nothing else; on a file the journal keeps 30 days unless told', async () => {
    const secret = 'retention-secret-0123456789';
    const db = join(tempDir('leasehold-replays-'), 'receiver.sqlite');
    const clock = fakeClock(Date.now());
    const first = await startReceiver({ db, clock, secret });
    const body = Buffer.from(JSON.stringify({ jobId: 'r', qty: 2 }));
    const signature = signatureHeader(secret, { method: 'POST', path: '/effects', token: 1, body }, Date.now());
    const replay = () => postEffect(first.url, { jobId: 'r', qty: 2, token: 1 }, { 'leasehold-signature': signature });
    expect((await replay()).status).toBe(201);
    for (let i = 0; i < 30; i++) expect((await replay()).status).toBe(200);
    expect(await first.effects()).toMatchObject([{ jobId: 'r', qty: 2, token: 1 }]);
    expect(await first.totals()).toEqual({ effects: 1, qty: 2 });
    const outcomes = (await first.journal()).map((entry) => entry.outcome);
    expect(outcomes).toEqual(['applied', ...Array<string>(30).fill('duplicate')]);
    await first.close();

    // 30 days later the entries go, at start, with no retention asked for; 'keep' keeps them.
    clock.advance(DEFAULT_RETAIN_JOURNAL_MS + 1);
    const kept = await startReceiver({ db, clock, secret, retainJournalMs: 'keep' });
    expect(await kept.journal()).toHaveLength(31);
    await kept.close();
    const pruned = await startReceiver({ db, clock, secret });
    closeAfterTest(() => pruned.close());
    await until('the journal is pruned at start', async () => (await pruned.journal()).length === 0, 5_000);
    expect(await pruned.effects()).toMatchObject([{ jobId: 'r', token: 1 }]);
    expect(DEFAULT_RETAIN_JOURNAL_MS).toBe(30 * 24 * 3_600_000);
  });

  test('a stub in memory keeps its whole journal by default', async () => {
    const clock = fakeClock(1_000_000);
    const stub = await startReceiver({ clock });
    closeAfterTest(() => stub.close());
    expect((await postEffect(stub.url, { jobId: 'm', qty: 1, token: 1 })).status).toBe(201);
    clock.advance(DEFAULT_RETAIN_JOURNAL_MS * 2);
    expect((await postEffect(stub.url, { jobId: 'm', qty: 1, token: 1 })).status).toBe(200);
    expect((await stub.journal()).map((entry) => entry.outcome)).toEqual(['applied', 'duplicate']);
  });

  test('a retention that is not a positive integer is refused before anything starts', async () => {
    for (const retainJournalMs of [0, -1, 1.5, Number.MAX_SAFE_INTEGER + 1]) {
      await expect(startReceiver({ retainJournalMs }), String(retainJournalMs)).rejects.toThrow(
        /^retainJournalMs must be a positive integer number of milliseconds/,
      );
    }
  });

  test('the prune interval is a tenth of the retention, between 1 s and 1 h', () => {
    expect([1, 1_000, 60_000, 600_000, 7 * 24 * 3_600_000].map(pruneIntervalMs)).toEqual([
      1_000, 1_000, 6_000, 60_000, 3_600_000,
    ]);
  });
});
