// What the gateway logs for one failed send: one line for the send, with its outcome, its cause
// and its request id, beside the request line every answered request gets, and nothing else; a
// retried attempt is a line of its own. Faults between the gateway and the receiver come from
// nock on the receiver's origin; an unreachable queue is a real closed port.
import nock from 'nock';
import { pino } from 'pino';
import request from 'supertest';
import { describe, expect, test } from 'vitest';
import { setup, type SetupOptions } from './setup.js';
import { interceptDownstreams } from './nock.js';

interceptDownstreams();

type Line = Record<string, unknown>;

async function loggedSetup(gateway: SetupOptions['gateway'] = {}) {
  const lines: Line[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as Line) });
  const s = await setup({ gateway: { logger, retryAttempts: 1, ...gateway } });
  const lease = await s.leased('job-1', 5);
  const send = { jobId: 'job-1', owner: 'w1', token: lease.token, qty: 5 };
  return { ...s, lines, send };
}

const resetError = () => Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });

/** The lines as level, message and the fields a test looks at (time, pid and hostname vary). */
const shown = (lines: Line[]) => lines.map(({ time: _t, pid: _p, hostname: _h, ...rest }) => rest);

describe('the log of one failed send', () => {
  test('a receiver that resets: the send line at warn carries the failure, then the request line; no third line', async () => {
    const s = await loggedSetup();
    nock(s.receiver.url).post('/effects').replyWithError(resetError());
    const res = await request(s.app).post('/send').set('X-Request-Id', 'send-1').send(s.send);
    expect(res.status).toBe(502);
    const failure = { attempt: 1, kind: 'reset', code: 'ECONNRESET', message: 'read ECONNRESET' };
    expect(shown(s.lines)).toEqual([
      {
        level: 40,
        reqId: 'send-1',
        jobId: 'job-1',
        owner: 'w1',
        token: s.send.token,
        downstream: 'receiver',
        outcome: 'upstream_unavailable',
        status: 502,
        attempts: 1,
        failures: [failure],
        ms: expect.any(Number),
        msg: res.body.error.message,
      },
      {
        level: 40,
        reqId: 'send-1',
        method: 'POST',
        path: '/send',
        status: 502,
        code: 'upstream_unavailable',
        ms: expect.any(Number),
        msg: 'request failed',
      },
    ]);
  });

  test('retried: each attempt that is retried is a line announcing the retry; the last is in the send line', async () => {
    const s = await loggedSetup({ retryAttempts: 2 });
    nock(s.receiver.url)
      .post('/effects')
      .times(2)
      .reply(500, { error: { code: 'internal', message: 'boom' } });
    const res = await request(s.app).post('/send').set('X-Request-Id', 'send-2').send(s.send);
    expect(res.status).toBe(502);
    expect(s.lines.map((line) => [line.level, line.msg, line.reqId])).toEqual([
      [40, 'forward attempt failed', 'send-2'],
      [40, res.body.error.message, 'send-2'],
      [40, 'request failed', 'send-2'],
    ]);
    expect(s.lines[0]).toMatchObject({ attempt: 1, retry: { retry: true } });
    expect((s.lines[1]!.failures as unknown[]).length).toBe(2);
  });

  test('an unreachable queue: the send line carries the socket error at error, then the request line; no third line', async () => {
    const s = await loggedSetup();
    await s.queue.close();
    const res = await request(s.app).post('/send').set('X-Request-Id', 'send-3').send(s.send);
    expect(res.status).toBe(503);
    expect(s.lines.map((line) => [line.level, line.msg, line.reqId, line.code ?? line.outcome])).toEqual([
      [50, res.body.error.message, 'send-3', 'queue_unavailable'],
      [40, 'request failed', 'send-3', 'queue_unavailable'],
    ]);
    expect(s.lines[0]).toMatchObject({ jobId: 'job-1', owner: 'w1', token: s.send.token, status: 503, attempts: 0 });
    // The cause: which queue, and the socket error, with its stack; never in the answer.
    const err = s.lines[0]!.err as { type: string; message: string; stack: string };
    expect(err.type).toBe('QueueError');
    expect(err.message).toContain(new URL(s.queue.url).host);
    expect(err.message).toContain('ECONNREFUSED');
    expect(err.stack).toContain('QueueError');
  });

  test('POST /sends: a failed send is its send line, with its cause, as under POST /send', async () => {
    const s = await loggedSetup();
    await s.queue.close();
    const res = await request(s.app)
      .post('/sends')
      .set('X-Request-Id', 'sends-1')
      .send({ sends: [s.send] });
    expect(res.body.results.map((r: { status: number }) => r.status)).toEqual([503]);
    // The request itself was answered 200: its line is at debug.
    expect(s.lines.map((line) => [line.level, line.outcome, line.reqId])).toEqual([
      [50, 'queue_unavailable', 'sends-1'],
    ]);
    expect((s.lines[0]!.err as { message: string }).message).toContain('ECONNREFUSED');
  });
});
