// The receiver's read routes against query strings they do not take, on a real receiver over a
// SQLite file and real HTTP: an unknown parameter's 400 names the ones the route does take, and
// a number not in plain digits is a 400, never read as another number.
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { startReceiver } from '../../receiver/index.js';
import { tempDir } from '../helpers/tmp.js';
import { closeAfterTest, send } from './setup.js';

const PLAIN = (name: string) => `${name} must be an integer written in plain digits, as in ${name}=10.`;

test.each([
  ['/effects?colour=red', 'unknown query parameter "colour"; GET /effects takes only jobId, after and limit.'],
  ['/effects?batch', 'unknown query parameter "batch"; GET /effects takes only jobId, after and limit.'],
  ['/effects/a?keys=x', 'unknown query parameter "keys"; GET /effects/:jobId takes only key.'],
  ['/journal?since=3&x=1', 'unknown query parameter "since", "x"; GET /journal takes only after and limit.'],
  ['/journal?after=0x10', PLAIN('after')],
  ['/journal?after=%20', PLAIN('after')],
  ['/journal?after=1e3', PLAIN('after')],
  ['/journal?limit=%2010', PLAIN('limit')],
  ['/effects?limit=1e2', PLAIN('limit')],
  ['/effects?limit=', PLAIN('limit')],
  ['/effects/r2?key=k&key=k2', 'key is given more than once; give it once.'],
  ['/effects?jobId=a&jobId=b', 'jobId is given more than once; give it once.'],
  ['/journal?after=1&after=2', 'after is given more than once; give it once.'],
])(
  'GET %s: 400 invalid_request saying what is wrong with the query, never read as another number',
  async (path, message) => {
    const receiver = await startReceiver({ db: join(tempDir('leasehold-queries-'), 'receiver.sqlite') });
    closeAfterTest(() => receiver.close());
    const res = await send(receiver.url, { path });
    expect({ status: res.status, code: res.body?.error?.code, message: res.body?.error?.message }).toEqual({
      status: 400,
      code: 'invalid_request',
      message: `The query string is invalid: ${message}`,
    });
  },
);
