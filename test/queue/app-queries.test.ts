// GET /jobs against query strings it does not take, on a real queue over a SQLite file and real
// HTTP: a number not in plain digits, a parameter given twice and an unknown parameter are each a
// 400 that says so, never a page read with another number than the one written.
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { startQueue } from '../../queue/index.js';
import { tempDir } from '../helpers/tmp.js';

test.each([
  ['/jobs?limit=0x10', 'limit must be an integer written in plain digits, as in limit=10.'],
  ['/jobs?limit=1e2', 'limit must be an integer written in plain digits, as in limit=10.'],
  ['/jobs?limit=%20', 'limit must be an integer written in plain digits, as in limit=10.'],
  ['/jobs?limit=', 'limit must be an integer written in plain digits, as in limit=10.'],
  ['/jobs?limit=1&limit=2', 'limit is given more than once; give it once.'],
  ['/jobs?status=done&status=dead', 'status is given more than once; give it once.'],
  ['/jobs?after=a&after=b', 'after is given more than once; give it once.'],
  ['/jobs?lean=true&lean=true', 'lean is given more than once; give it once.'],
  ['/jobs?colour=red', 'unknown query parameter "colour"; GET /jobs takes only status, limit, after and lean.'],
])('GET %s: 400 invalid_request saying what is wrong with the query', async (path, message) => {
  const queue = await startQueue({ db: join(tempDir('leasehold-queue-queries-'), 'queue.sqlite') });
  try {
    await fetch(`${queue.url}/jobs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ id: 'a', qty: 1 }),
    });
    const res = await fetch(`${queue.url}${path}`);
    const body = (await res.json()) as { error?: { code?: string; message?: string } };
    expect({ status: res.status, code: body.error?.code, message: body.error?.message }).toEqual({
      status: 400,
      code: 'invalid_request',
      message: `The query string is invalid: ${message}`,
    });
    // A limit in plain digits still pages as before.
    const page = await fetch(`${queue.url}/jobs?limit=1`);
    expect(page.status).toBe(200);
    expect(((await page.json()) as { jobs: unknown[] }).jobs).toHaveLength(1);
  } finally {
    await queue.close();
  }
});
