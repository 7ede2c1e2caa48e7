// The conformance suite against downstreams broken below the protocol, each a real server on
// 127.0.0.1: answers that are not JSON, cut connections, oversized answers, bad batch answers and
// offers, a port that does not speak HTTP, and one that never answers. Each failure must say what
// was expected and what came, as one sentence under the case's name, never "could not be reached"
// for a port that answered; a request left unanswered stops the run after its case.
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { describe, expect, onTestFinished, test } from 'vitest';
import { conform, formatCase, formatSummary, type ConformReport } from '../../conform/index.js';
import { toyDownstream } from '../helpers/toy-downstream.js';

const FIRST_CASE = 'applied, then duplicate with nothing added';
const BATCH_CASE = 'a batch, when offered, is judged effect by effect as single requests are';

/** Listens on a free 127.0.0.1 port until the test ends; resolves to the port. */
async function listen(server: net.Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  onTestFinished(
    () =>
      new Promise<void>((resolve) => {
        if (server instanceof http.Server) server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return (server.address() as AddressInfo).port;
}

/** A downstream that answers every request with `handler`, after reading the request. */
async function downstream(handler: (res: http.ServerResponse, req: http.IncomingMessage) => void): Promise<string> {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => handler(res, req));
  });
  return `http://127.0.0.1:${await listen(server)}/effects`;
}

/**
 * A downstream that applies every single request and offers `offer` in Leasehold-Batch; a
 * request anywhere else (the batch target) is answered by `batch`.
 */
function offering(
  offer: string | string[],
  batch: (res: http.ServerResponse) => void = (res) => res.end(),
): Promise<string> {
  return downstream((res, req) => {
    if (req.url !== '/effects') return batch(res);
    res.writeHead(201, { 'content-type': 'application/json', 'leasehold-batch': offer });
    res.end(JSON.stringify({ outcome: 'applied', effect: { qty: 1 } }));
  });
}

function json(status: number, body: unknown): (res: http.ServerResponse) => void {
  return (res) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };
}

const run = (url: string) => conform({ url, races: 2, timeoutMs: 5_000 });

/** The failure sentence of the case named `name`. */
const detail = (report: ConformReport, name: string) => report.cases.find((c) => c.name === name)?.detail;

/** The whole report, shown with a failing assertion. */
const shown = (report: ConformReport) => report.cases.map(formatCase).join('\n');

/** Every case that talks to the downstream failed, each with "expected …, got …", none saying it could not be reached. */
function expectOnlyFailures(report: ConformReport): void {
  const failures = report.cases.filter((c) => c.status === 'failed');
  expect(report.passed, shown(report)).toBe(0);
  for (const failure of failures) {
    expect(failure.detail, failure.name).toMatch(/: expected .+, got /);
    expect(failure.detail, failure.name).not.toMatch(/could not be reached|the request failed/);
  }
}

describe('conform against a broken downstream', () => {
  test('an answer that is not JSON, is empty, or lacks its effect is described as such, not by its status alone', async () => {
    const html = await downstream((res) => {
      res.writeHead(201, { 'content-type': 'text/html' });
      res.end('<html>oops</html>');
    });
    const empty = await downstream((res) => res.writeHead(200).end());
    const noEffect = await downstream(json(201, { outcome: 'applied' }));
    const got = [];
    for (const url of [html, empty, noEffect]) {
      const report = await run(url);
      expectOnlyFailures(report);
      got.push(detail(report, FIRST_CASE));
    }
    expect(got).toEqual([
      'first request: expected 201 applied, got 201 with a body that is not a JSON object: "<html>oops</html>"',
      'first request: expected 201 applied, got 200 with an empty body',
      'first request: expected 201 applied, got 201 applied without an effect',
    ]);
  });

  test('a connection cut without an answer, or in the middle of one, is no answer, not an unreachable downstream', async () => {
    const hangUp = await downstream((_res, req) => req.socket.destroy());
    const cut = await downstream((res, req) => {
      res.writeHead(201, { 'content-type': 'application/json', 'content-length': '100' });
      res.write('{"outcome":');
      setTimeout(() => req.socket.destroy(), 20);
    });
    const got = [];
    for (const url of [hangUp, cut]) {
      const report = await run(url);
      expectOnlyFailures(report);
      got.push(detail(report, FIRST_CASE));
    }
    expect(got).toEqual([
      'first request: expected 201 applied, got no answer: the connection was closed without one (ECONNRESET)',
      'first request: expected 201 applied, got an answer cut off: the connection closed before its last byte',
    ]);
  });

  test('an answer over the size conform reads is named as too large, not as an unreachable downstream', async () => {
    const big = Buffer.alloc(9 * 1024 * 1024, 'x');
    const url = await downstream((res) => {
      res.writeHead(201, { 'content-type': 'application/json' });
      res.end(big);
    });
    const report = await run(url);
    expectOnlyFailures(report);
    expect(detail(report, FIRST_CASE)).toBe(
      'first request: expected 201 applied, got an answer over 8 MiB, which conform does not read',
    );
  });

  test('a batch answer with the wrong number of results, or results without a status, says which', async () => {
    const got = [];
    for (const results of [[{ status: 200 }], [{ status: 200 }, null, {}, { status: '422' }, 201, 409, 400]]) {
      const report = await run(await offering('/effects?batch', json(200, { results })));
      got.push(detail(report, BATCH_CASE));
    }
    const nothing = await run(await offering('/effects?batch', json(200, { effects: [] })));
    got.push(detail(nothing, BATCH_CASE));
    expect(got).toEqual([
      'the batch: expected 200 with 7 results, got 200 with 1 result',
      'the batch: expected each of the 7 results to have an integer status, got result 2: null, result 3: {}, result 4: {"status":"422"}, 3 more',
      'the batch: expected 200 with 7 results, got 200 without a results array: {"effects":[]}',
    ]);
  });

  test('a bad Leasehold-Batch offer fails the batch case saying what was offered and why it is unusable', async () => {
    const offers = ['http://[::1', 'ftp://127.0.0.1/batch', '', 'http://127.0.0.1:1/batch', ['/b', '/b']];
    const got = [];
    for (const offer of offers) {
      const url = await offering(offer);
      const report = await run(url);
      const origin = new URL(url).origin;
      got.push(detail(report, BATCH_CASE)?.replace(origin, '<origin>'));
    }
    const expected =
      "the first request: expected Leasehold-Batch to name a target on the endpoint's origin, <origin>, got";
    expect(got).toEqual([
      `${expected} "http://[::1", which is not a URL`,
      `${expected} "ftp://127.0.0.1/batch", which is not an http: URL`,
      `${expected} an empty header`,
      `${expected} "http://127.0.0.1:1/batch", which is on http://127.0.0.1:1`,
      `${expected} "/b, /b", which holds whitespace (a header sent twice is joined with ", ")`,
    ]);
  });

  test('a port that does not speak HTTP is named as such, not as an unreachable downstream', async () => {
    const server = net.createServer((socket) => {
      socket.on('error', () => {});
      socket.once('data', () => socket.end('garbage\r\n\r\n'));
    });
    const report = await run(`http://127.0.0.1:${await listen(server)}/effects`);
    expectOnlyFailures(report);
    expect(detail(report, FIRST_CASE)).toMatch(
      /^first request: expected 201 applied, got an answer that is not HTTP \(HPE_[A-Z_]+\)$/,
    );
  });

  test('a downstream that never answers fails the first case as timed out and runs no other: one timeout, not one per case', async () => {
    const url = await downstream(() => {});
    const timeoutMs = 1_000;
    const started = performance.now();
    // With a secret, so that every case would run.
    const report = await conform({ url, secret: 'hung', races: 2, timeoutMs });
    const elapsedMs = performance.now() - started;
    const [first, ...rest] = report.cases;
    expect(
      { elapsedUnder6Timeouts: elapsedMs < 6 * timeoutMs, first, summary: formatSummary(report) },
      `${Math.round(elapsedMs)} ms\n${shown(report)}`,
    ).toEqual({
      elapsedUnder6Timeouts: true,
      first: {
        name: FIRST_CASE,
        status: 'failed',
        detail: `first request: expected 201 applied, got no answer from ${url} within 1000 ms`,
      },
      summary: `0 passed, 1 failed, ${rest.length} not run`,
    });
    expect(rest.map(formatCase)).toEqual(
      rest.map((c) => `skip  ${c.name} (not run: the downstream did not answer a request within 1000 ms)`),
    );
    expect(rest).toHaveLength(15);
  });

  test('a request unanswered in the race counts as a timeout: the cases after it are not run', async () => {
    // Answers every request but the race's second one, as a downstream keeping the protocol would.
    const toy = await toyDownstream({ delayMs: (n) => (n === 29 ? 3_000 : 0) });
    const report = await conform({ url: toy.url, races: 2, timeoutMs: 1_000 });
    const race = report.cases.findIndex((c) => c.name === 'racing identical requests give exactly one applied');
    expect(
      report.cases.slice(race).map((c) => [c.status, c.detail?.replace(/got .*/, 'got …')]),
      shown(report),
    ).toEqual([
      ['failed', '2 racing requests: expected 1 × 201 applied and 1 × 200 duplicate, got …'],
      ...report.cases
        .slice(race + 1)
        .map((c) => ['skipped', c.name.endsWith('is 401') ? 'no secret given' : expect.stringMatching(/^not run: /)]),
    ]);
    expect(formatSummary(report)).toBe(`${race} passed, 1 failed, 2 not run`);
  });

  test('a downstream that answers its first request slowly, within the timeout, gets every case', async () => {
    const toy = await toyDownstream({ secret: 'slow', delayMs: (n) => (n === 1 ? 1_000 : 0) });
    const report = await conform({ url: toy.url, secret: 'slow', races: 2, timeoutMs: 2_000 });
    expect({ ...report, cases: report.cases.length }, shown(report)).toEqual({
      url: toy.url,
      cases: 16,
      passed: 15,
      failed: 0,
      notRun: 0,
    });
    expect(formatSummary(report)).toBe('15 passed, 0 failed');
  });
});
