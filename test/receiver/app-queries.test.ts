// The receiver's read routes against query parameters they do not take, on a real receiver over
// a SQLite file and real HTTP: the 400 names the parameter and the ones the route does take.
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { startReceiver } from '../../receiver/index.js';
import { tempDir } from '../helpers/tmp.js';
import { closeAfterTest, send } from './setup.js';

test.each([
  ['/effects?colour=red', 'unknown query parameter "colour"; GET /effects takes only jobId, after and limit.'],
  ['/effects?batch', 'unknown query parameter "batch"; GET /effects takes only jobId, after and limit.'],
  ['/effects/a?keys=x', 'unknown query parameter "keys"; GET /effects/:jobId takes only key.'],
  ['/journal?since=3&x=1', 'unknown query parameter "since", "x"; GET /journal takes only after and limit.'],
])('GET %s: an unknown query parameter is 400 naming the ones the route takes', async (path, message) => {
  const receiver = await startReceiver({ db: join(tempDir('leasehold-queries-'), 'receiver.sqlite') });
  closeAfterTest(() => receiver.close());
  const res = await send(receiver.url, { path });
  expect({ status: res.status, code: res.body?.error?.code, message: res.body?.error?.message }).toEqual({
    status: 400,
    code: 'invalid_request',
    message: `The query string is invalid: ${message}`,
  });
});

test.each([
  ['/journal?after=0x10', 'after'],
  ['/journal?after=%20', 'after'],
  ['/journal?after=1e3', 'after'],
  ['/journal?limit=%2010', 'limit'],
  ['/effects?limit=1e2', 'limit'],
  ['/effects?limit=', 'limit'],
])('GET %s: a number not written as plain digits is 400, not read as another number', async (path, name) => {
  const receiver = await startReceiver({ db: join(tempDir('leasehold-queries-'), 'receiver.sqlite') });
  closeAfterTest(() => receiver.close());
  const res = await send(receiver.url, { path });
  expect({ status: res.status, code: res.body?.error?.code, message: res.body?.error?.message }).toEqual({
    status: 400,
    code: 'invalid_request',
    message: `The query string is invalid: ${name} must be an integer written in plain digits, as in ${name}=10.`,
  });
});
