// docs/examples/downstream.mjs, the downstream written by hand on node:http and sqlite3, run as
// a real child process and held to docs/downstream-protocol.md: applied, duplicate, the fence
// across a job's keys, conflicts, racing requests, bad input and signatures; its rows read back
// from its SQLite file.
import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, onTestFinished, test } from 'vitest';
import { spawnNode } from '../../platform/spawn.js';
import { openSqlite } from '../../platform/sqlite.js';
import { signatureHeader } from '../../receiver/signature.js';
import { cleanEnv, ROOT } from '../helpers/processes.js';
import { tempDir } from '../helpers/tmp.js';

const EXAMPLE = join(ROOT, 'docs', 'examples', 'downstream.mjs');

async function startDownstream(options: { db?: string; secret?: string } = {}) {
  const db = options.db ?? join(tempDir('leasehold-downstream-'), 'downstream.sqlite');
  const env = { ...cleanEnv(), DB: db, PORT: '0', ...(options.secret ? { LEASEHOLD_SECRET: options.secret } : {}) };
  const child = spawnNode([EXAMPLE], { name: 'downstream.mjs', env });
  onTestFinished(async ({ task }) => {
    if (task.result?.state === 'fail') console.error(`downstream.mjs stderr:\n${child.stderr()}`);
    await child.stop('SIGKILL');
  });
  const url = await child.listening(20_000);
  return { url, db, child };
}

interface Answer {
  status: number;
  replayed: string | null;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- a JSON answer; each test reads its fields
  body: any;
}

async function post(
  url: string,
  token: number | string,
  effect: unknown,
  headers: Record<string, string> = {},
  path = '/effects',
): Promise<Answer> {
  const res = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'Fencing-Token': String(token), ...headers },
    body: typeof effect === 'string' ? effect : JSON.stringify(effect),
  });
  return { status: res.status, replayed: res.headers.get('idempotent-replayed'), body: await res.json() };
}

interface EffectRow {
  job_id: string;
  effect_key: string;
  qty: number | null;
  body: string | null;
  token: number;
}

/** Every effect row and job row in the downstream's file, read with a connection of our own. */
async function rows(
  db: string,
): Promise<{ effects: EffectRow[]; jobs: Array<{ job_id: string; highest_token: number }> }> {
  const database = openSqlite({ filename: db });
  const { knex } = database;
  try {
    return {
      effects: await knex('effects')
        .select('job_id', 'effect_key', 'qty', 'body', 'token')
        .orderBy(['job_id', 'effect_key']),
      jobs: await knex('jobs').select('job_id', 'highest_token').orderBy('job_id'),
    };
  } finally {
    await database.close();
  }
}

describe('the hand-written downstream (docs/examples/downstream.mjs)', () => {
  test('applied, then duplicate with nothing added; a body compares with key order ignored', async () => {
    const { url, db } = await startDownstream();
    const first = await post(url, 2, { jobId: 'order-1', qty: 3 });
    expect({ status: first.status, body: first.body }).toEqual({
      status: 201,
      body: { outcome: 'applied', effect: { jobId: 'order-1', qty: 3, token: 2, appliedAt: expect.any(Number) } },
    });
    const again = await post(url, 3, { jobId: 'order-1', qty: 3 });
    expect({ status: again.status, replayed: again.replayed, body: again.body }).toEqual({
      status: 200,
      replayed: 'true',
      body: { outcome: 'duplicate', effect: first.body.effect },
    });
    const mail = { jobId: 'order-1', key: 'mail', body: { to: 'ann@example.com', lines: [{ sku: 'a', n: 1 }] } };
    expect((await post(url, 3, mail)).status).toBe(201);
    const reordered = { jobId: 'order-1', key: 'mail', body: { lines: [{ n: 1, sku: 'a' }], to: 'ann@example.com' } };
    expect((await post(url, 3, reordered)).body).toMatchObject({ outcome: 'duplicate', effect: { key: 'mail' } });
    expect(await rows(db)).toEqual({
      effects: [
        { job_id: 'order-1', effect_key: '', qty: 3, body: null, token: 2 },
        {
          job_id: 'order-1',
          effect_key: 'mail',
          qty: null,
          body: '{"lines":[{"n":1,"sku":"a"}],"to":"ann@example.com"}',
          token: 3,
        },
      ],
      jobs: [{ job_id: 'order-1', highest_token: 3 }],
    });
  });

  test('the fence is per job: a lower token is fenced on the same key and on another key, and changes nothing', async () => {
    const { url, db } = await startDownstream();
    expect((await post(url, 5, { jobId: 'j', key: 'charge', qty: 10 })).status).toBe(201);
    const before = await rows(db);
    const sameKey = await post(url, 4, { jobId: 'j', key: 'charge', qty: 10 });
    const otherKey = await post(url, 4, { jobId: 'j', key: 'mail', body: 'hello' });
    const defaultEffect = await post(url, 1, { jobId: 'j', qty: 1 });
    for (const [what, res] of [
      ['same key', sameKey],
      ['another key', otherKey],
      ['the default effect', defaultEffect],
    ] as const) {
      expect({
        what,
        status: res.status,
        code: res.body.error?.code,
        highestToken: res.body.error?.highestToken,
      }).toEqual({ what, status: 409, code: 'fenced', highestToken: 5 });
    }
    expect(await rows(db)).toEqual(before);
    // Another job is not fenced by this one.
    expect((await post(url, 1, { jobId: 'k', key: 'mail', body: 'hello' })).status).toBe(201);
  });

  test('another qty or body for a recorded effect is 422 conflict with the recorded effect, and raises nothing', async () => {
    const { url, db } = await startDownstream();
    const recorded = (await post(url, 2, { jobId: 'j', key: 'charge', qty: 10, body: { currency: 'EUR' } })).body
      .effect;
    const cases = [
      { jobId: 'j', key: 'charge', qty: 11, body: { currency: 'EUR' } },
      { jobId: 'j', key: 'charge', qty: 10, body: { currency: 'USD' } },
      { jobId: 'j', key: 'charge', qty: 10 },
    ];
    for (const effect of cases) {
      const res = await post(url, 7, effect);
      expect({ effect, status: res.status, code: res.body.error?.code, recorded: res.body.error?.effect }).toEqual({
        effect,
        status: 422,
        code: 'conflict',
        recorded,
      });
    }
    expect((await rows(db)).jobs).toEqual([{ job_id: 'j', highest_token: 2 }]);
    expect((await post(url, 3, { jobId: 'j', key: 'charge', qty: 10, body: { currency: 'EUR' } })).status).toBe(200);
  });

  test('racing requests, from one process and from two on the same file, give exactly one applied per effect', async () => {
    const first = await startDownstream();
    const second = await startDownstream({ db: first.db });
    const urls = [first.url, second.url];
    const racing = Array.from({ length: 24 }, (_, i) =>
      post(urls[i % 2]!, 1 + (i % 3), { jobId: 'race', key: `k${i % 2}`, qty: 2 }),
    );
    const answers = await Promise.all(racing);
    const outcomes = (key: string) =>
      answers.filter((_, i) => `k${i % 2}` === key).map((a) => a.body.outcome ?? a.body.error?.code);
    for (const key of ['k0', 'k1']) {
      const applied = outcomes(key).filter((o) => o === 'applied').length;
      expect({
        key,
        applied,
        others: outcomes(key).filter((o) => !['applied', 'duplicate', 'fenced'].includes(o)),
      }).toEqual({ key, applied: 1, others: [] });
    }
    expect((await rows(first.db)).effects.map((e) => e.effect_key)).toEqual(['k0', 'k1']);
  });

  test('bad input is 400 invalid_request, 415 for another type, and records nothing', async () => {
    const { url, db } = await startDownstream();
    expect((await post(url, 1, { jobId: 'seed', qty: 1 })).status).toBe(201);
    const before = await rows(db);
    const cases: Array<[string, number | string, unknown]> = [
      ['no token', '', { jobId: 'a', qty: 1 }],
      ['token 0', 0, { jobId: 'a', qty: 1 }],
      ['neither qty nor body', 1, { jobId: 'a', key: 'k' }],
      ['empty key', 1, { jobId: 'a', key: '', qty: 1 }],
      ['key of 129 characters', 1, { jobId: 'a', key: 'k'.repeat(129), qty: 1 }],
      ['qty 0', 1, { jobId: 'a', qty: 0 }],
      ['body over 64 KiB', 1, { jobId: 'a', body: 'x'.repeat(64 * 1024) }],
      ['unknown field', 1, { jobId: 'a', qty: 1, extra: true }],
      ['not JSON', 1, '{"jobId":'],
    ];
    for (const [what, token, effect] of cases) {
      const res = await post(url, token, effect);
      expect({ what, status: res.status, code: res.body.error?.code }).toEqual({
        what,
        status: 400,
        code: 'invalid_request',
      });
    }
    const typed = await fetch(`${url}/effects`, {
      method: 'POST',
      headers: { 'Content-Type': 'text/plain', 'Fencing-Token': '1' },
      body: JSON.stringify({ jobId: 'a', qty: 1 }),
    });
    expect(typed.status).toBe(415);
    expect(await rows(db)).toEqual(before);
  });

  test('with a secret: unsigned, forged, another route, another token, stale and v1 signatures are 401; v2 is applied', async () => {
    const secret = 'downstream-secret';
    const { url, db } = await startDownstream({ secret });
    const body = JSON.stringify({ jobId: 'signed', key: 'charge', qty: 4 });
    const sign = (over: { path?: string; token?: number; at?: number } = {}) =>
      signatureHeader(
        secret,
        { method: 'POST', path: over.path ?? '/effects', token: over.token ?? 2, body: Buffer.from(body) },
        over.at ?? Date.now(),
      );
    const t = Date.now();
    const v1 = `t=${t},v1=${createHmac('sha256', secret).update(`${t}.2.${body}`).digest('hex')}`;
    const refused: Array<[string, Record<string, string>]> = [
      ['unsigned', {}],
      ['forged', { 'Leasehold-Signature': `t=${t},v2=${'0'.repeat(64)}` }],
      ['signed for another route', { 'Leasehold-Signature': sign({ path: '/payments' }) }],
      ['signed for another token', { 'Leasehold-Signature': sign({ token: 3 }) }],
      ['six minutes old', { 'Leasehold-Signature': sign({ at: Date.now() - 6 * 60_000 }) }],
      ['v1 only', { 'Leasehold-Signature': v1 }],
    ];
    for (const [what, headers] of refused) {
      const res = await post(url, 2, body, headers);
      expect({ what, status: res.status, code: res.body.error?.code }).toEqual({
        what,
        status: 401,
        code: 'invalid_signature',
      });
    }
    expect((await rows(db)).effects).toEqual([]);
    const signed = await post(url, 2, body, { 'Leasehold-Signature': sign() });
    expect({ status: signed.status, outcome: signed.body.outcome }).toEqual({ status: 201, outcome: 'applied' });
  });

  test('imports nothing but node: modules and sqlite3', () => {
    const imports = [...readFileSync(EXAMPLE, 'utf8').matchAll(/^import .* from '([^']+)';$/gm)].map((m) => m[1]);
    expect(imports.filter((name) => !name!.startsWith('node:') && name !== 'sqlite3')).toEqual([]);
  });
});
