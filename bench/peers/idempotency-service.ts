// The downstream a team builds instead of leasehold's receiver, for the peer columns: a small
// node:http service that records each job's effect once by its `Idempotency-Key`, with
// `INSERT ... ON CONFLICT DO NOTHING` on SQLite, one fsync'd transaction per request
// (synchronous=FULL, rollback journal or WAL). It has no fence: a late effect is caught only if
// its key was seen before, never by a token.
//
//   node idempotency-service.js --db FILE [--journal delete|wal]
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import { openBare } from '../bare-sqlite.js';

const { values } = parseArgs({ options: { db: { type: 'string' }, journal: { type: 'string', default: 'delete' } } });
if (!values.db) throw new Error('--db FILE is required');
const journal = values.journal === 'wal' ? 'wal' : 'delete';
const db = await openBare(values.db, journal);
await db.exec('CREATE TABLE IF NOT EXISTS effects (key TEXT PRIMARY KEY, job TEXT NOT NULL, qty INTEGER NOT NULL)');

function answer(res: http.ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    const key = req.headers['idempotency-key'];
    if (req.method !== 'POST' || req.url !== '/effects') return answer(res, 404, { error: 'not found' });
    if (typeof key !== 'string' || key.length === 0) return answer(res, 400, { error: 'Idempotency-Key missing' });
    let effect: { job?: unknown; qty?: unknown };
    try {
      effect = JSON.parse(Buffer.concat(chunks).toString('utf8')) as typeof effect;
    } catch {
      return answer(res, 400, { error: 'the body is not JSON' });
    }
    if (typeof effect.job !== 'string' || !Number.isSafeInteger(effect.qty)) {
      return answer(res, 400, { error: 'job (string) and qty (integer) are required' });
    }
    // One statement outside any transaction: SQLite commits it on its own, one fsync'd transaction.
    db.run('INSERT INTO effects (key, job, qty) VALUES (?, ?, ?) ON CONFLICT (key) DO NOTHING', [
      key,
      effect.job,
      effect.qty,
    ]).then(
      ({ changes }) => answer(res, changes === 1 ? 201 : 200, { key, recorded: changes === 1 }),
      (err: unknown) => answer(res, 500, { error: err instanceof Error ? err.message : String(err) }),
    );
  });
});
server.keepAliveTimeout = 5_000;
server.listen(0, '127.0.0.1', () => {
  console.log(`listening on http://127.0.0.1:${(server.address() as AddressInfo).port}`);
});
process.on('SIGTERM', () => {
  server.close();
  void db.close().finally(() => process.exit(0));
});
