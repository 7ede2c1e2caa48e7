// A fenced downstream written by hand, on node:http and SQLite (the `sqlite3` package), with no
// leasehold code in it: it keeps the protocol of docs/downstream-protocol.md, so a gateway can
// send it effects and `leasehold conform` can check it. Each effect is a row in `effects`, written
// once per (jobId, key) in the transaction that judges the request.
//
//   DB=./data/downstream.sqlite PORT=8080 LEASEHOLD_SECRET=... node docs/examples/downstream.mjs
//
// PORT 0 (the default) picks a free port; the URL is printed as "downstream listening on <url>".
// EFFECT_PATH (default /effects) is the route effects are posted to; without LEASEHOLD_SECRET,
// unsigned requests are accepted.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { createServer } from 'node:http';
import { dirname } from 'node:path';
import sqlite3 from 'sqlite3';

const DB = process.env.DB ?? './data/downstream.sqlite';
const PORT = Number(process.env.PORT ?? 0);
const EFFECT_PATH = process.env.EFFECT_PATH ?? '/effects';
const SECRET = process.env.LEASEHOLD_SECRET || undefined;

const MAX_REQUEST_BYTES = 1024 * 1024;
const MAX_BODY_BYTES = 64 * 1024;
const SIGNATURE_WINDOW_MS = 5 * 60 * 1000;

// ---- the database: one row per job (its highest token), one row per effect ----------------------

if (DB !== ':memory:') mkdirSync(dirname(DB), { recursive: true });
const db = new sqlite3.Database(DB);
db.configure('busyTimeout', 5000);

const run = (sql, params = []) =>
  new Promise((resolve, reject) => db.run(sql, params, (err) => (err ? reject(err) : resolve())));
const get = (sql, params = []) =>
  new Promise((resolve, reject) => db.get(sql, params, (err, row) => (err ? reject(err) : resolve(row))));

await run('PRAGMA synchronous = FULL');
await run(`CREATE TABLE IF NOT EXISTS jobs (
  job_id TEXT PRIMARY KEY,
  highest_token INTEGER NOT NULL)`);
// The default effect (no key) is stored under the key '', which no real key can be.
await run(`CREATE TABLE IF NOT EXISTS effects (
  job_id TEXT NOT NULL,
  effect_key TEXT NOT NULL,
  qty INTEGER,
  body TEXT,
  token INTEGER NOT NULL,
  applied_at INTEGER NOT NULL,
  PRIMARY KEY (job_id, effect_key))`);

// One connection runs one transaction at a time: requests wait here for the one before them.
// BEGIN IMMEDIATE takes the write lock first, so another process on the same file waits too.
let queue = Promise.resolve();
function inTransaction(work) {
  const result = queue.then(async () => {
    await run('BEGIN IMMEDIATE');
    try {
      const value = await work();
      await run('COMMIT');
      return value;
    } catch (err) {
      await run('ROLLBACK').catch(() => undefined);
      throw err;
    }
  });
  queue = result.catch(() => undefined);
  return result;
}

// ---- the rule: fence per job, record once per (jobId, key) ---------------------------------------

/** JSON with every object's keys sorted: two bodies that differ only in key order compare equal. */
function canonical(value) {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  const keys = Object.keys(value).sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical(value[k])}`).join(',')}}`;
}

function effectOf(row) {
  return {
    jobId: row.job_id,
    ...(row.effect_key === '' ? {} : { key: row.effect_key }),
    ...(row.qty === null ? {} : { qty: row.qty }),
    ...(row.body === null ? {} : { body: JSON.parse(row.body) }),
    token: row.token,
    appliedAt: row.applied_at,
  };
}

/** Judges and records one request in one transaction; answers [status, body]. */
function record({ jobId, key, qty, body }, token) {
  const storedKey = key ?? '';
  const keyed = key === undefined ? {} : { key };
  const storedBody = body === undefined ? null : canonical(body);
  return inTransaction(async () => {
    const job = await get('SELECT highest_token FROM jobs WHERE job_id = ?', [jobId]);
    // The fence is per job: a lower token than the job's highest, by any of its effects, is refused.
    if (job && token < job.highest_token) {
      const message = `Fencing token ${token} is lower than token ${job.highest_token} already seen for job "${jobId}": a newer lease holds this job.`;
      return [409, { error: { code: 'fenced', message, jobId, ...keyed, token, highestToken: job.highest_token } }];
    }
    const row = await get('SELECT * FROM effects WHERE job_id = ? AND effect_key = ?', [jobId, storedKey]);
    if (row && (row.qty !== (qty ?? null) || row.body !== storedBody)) {
      const message = `Job "${jobId}" already has this effect with another qty or body; it is recorded once.`;
      return [422, { error: { code: 'conflict', message, jobId, ...keyed, effect: effectOf(row) } }];
    }
    // Applied or duplicate: either raises the job's highest token.
    await run(
      `INSERT INTO jobs (job_id, highest_token) VALUES (?, ?)
       ON CONFLICT (job_id) DO UPDATE SET highest_token = max(highest_token, excluded.highest_token)`,
      [jobId, token],
    );
    if (row) return [200, { outcome: 'duplicate', effect: effectOf(row) }];
    const appliedAt = Date.now();
    await run('INSERT INTO effects (job_id, effect_key, qty, body, token, applied_at) VALUES (?, ?, ?, ?, ?, ?)', [
      jobId,
      storedKey,
      qty ?? null,
      storedBody,
      token,
      appliedAt,
    ]);
    // A real downstream performs its effect here, through the same transaction.
    const applied = {
      job_id: jobId,
      effect_key: storedKey,
      qty: qty ?? null,
      body: storedBody,
      token,
      applied_at: appliedAt,
    };
    return [201, { outcome: 'applied', effect: effectOf(applied) }];
  });
}

// ---- the request: headers, signature, body ----------------------------------------------------

class Refusal extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}
const invalid = (message) => new Refusal(400, 'invalid_request', message);

function parseToken(header) {
  const text = (header ?? '').trim();
  if (!/^\d+$/.test(text)) throw invalid('The Fencing-Token header must be an integer >= 1.');
  const token = Number(text);
  if (!Number.isSafeInteger(token) || token < 1) throw invalid('The Fencing-Token header must be a safe integer >= 1.');
  return token;
}

function hmac(text) {
  return createHmac('sha256', SECRET).update(text).digest();
}

/** `Leasehold-Signature: t=<ms>,v2=<hex>` over "<t>.<token>.<METHOD> <path>.<raw body>", within 5 minutes. */
function checkSignature(header, { method, path, token, raw }) {
  const refuse = (why) => new Refusal(401, 'invalid_signature', why);
  if (!header) throw refuse('The Leasehold-Signature header is missing.');
  const parts = header.split(',').map((part) => part.trim().split('='));
  const t = parts.find(([name]) => name === 't')?.[1];
  const v2 = parts.filter(([name]) => name === 'v2').map(([, value]) => value ?? '');
  if (!t || !/^\d+$/.test(t)) throw refuse('The signature has no timestamp t=<epoch ms>.');
  if (v2.length === 0) throw refuse('The signature has no v2= entry; sign with v2.');
  if (Math.abs(Date.now() - Number(t)) > SIGNATURE_WINDOW_MS)
    throw refuse('The signature is too old or too far in the future.');
  const expected = hmac(Buffer.concat([Buffer.from(`${t}.${token}.${method} ${path}.`), raw]));
  const matches = v2.some((hex) => {
    const given = /^[0-9a-f]{64}$/i.test(hex) ? Buffer.from(hex, 'hex') : Buffer.alloc(0);
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
  if (!matches) throw refuse('The signature does not match this request.');
}

/** An id: 1 to `max` characters, well-formed Unicode, no NUL, not "." or "..". */
function idProblem(value, what, max) {
  if (typeof value !== 'string' || value.length === 0 || value.length > max)
    return `${what} must be a string of 1 to ${max} characters`;
  if (!value.isWellFormed() || value.includes('\0') || value === '.' || value === '..')
    return `${what} must be well-formed Unicode, without NUL, and not "." or ".."`;
  return undefined;
}

function parseEffect(raw) {
  let json;
  try {
    json = JSON.parse(raw.toString('utf8'));
  } catch {
    throw invalid('The request body is not valid JSON.');
  }
  if (json === null || typeof json !== 'object' || Array.isArray(json))
    throw invalid('The body must be a JSON object.');
  const unknown = Object.keys(json).filter((name) => !['jobId', 'key', 'qty', 'body'].includes(name));
  if (unknown.length > 0)
    throw invalid(`Unknown field ${unknown.join(', ')}; the body has only jobId, key, qty and body.`);
  const { jobId, key, qty, body } = json;
  const problem = idProblem(jobId, 'jobId', 256) ?? (key === undefined ? undefined : idProblem(key, 'key', 128));
  if (problem) throw invalid(`${problem}.`);
  if (qty !== undefined && (!Number.isSafeInteger(qty) || qty < 1)) throw invalid('qty must be a safe integer >= 1.');
  if (qty === undefined && body === undefined) throw invalid('Give qty, body or both.');
  if (body !== undefined && Buffer.byteLength(JSON.stringify(body)) > MAX_BODY_BYTES)
    throw invalid(`body must be at most ${MAX_BODY_BYTES} bytes serialized as JSON.`);
  return { jobId, key, qty, body };
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let size = 0;
    req.on('data', (chunk) => {
      size += chunk.length;
      if (size > MAX_REQUEST_BYTES) reject(new Refusal(413, 'payload_too_large', 'The body is over 1 MiB.'));
      else chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

async function handle(req) {
  if (req.method !== 'POST' || req.url !== EFFECT_PATH)
    throw new Refusal(404, 'not_found', `Post effects to ${EFFECT_PATH}.`);
  if (!/^application\/(.+\+)?json\b/i.test(req.headers['content-type'] ?? ''))
    throw new Refusal(415, 'unsupported_media_type', 'Send Content-Type: application/json.');
  const raw = await readBody(req);
  const token = parseToken(req.headers['fencing-token']);
  if (SECRET) checkSignature(req.headers['leasehold-signature'], { method: req.method, path: req.url, token, raw });
  return record(parseEffect(raw), token);
}

const server = createServer((req, res) => {
  handle(req)
    .catch((err) => {
      if (err instanceof Refusal) return [err.status, { error: { code: err.code, message: err.message } }];
      console.error(err);
      return [500, { error: { code: 'internal', message: 'The effect was not recorded; retry the request.' } }];
    })
    .then(([status, body]) => {
      const headers = { 'Content-Type': 'application/json' };
      if (status === 200) headers['Idempotent-Replayed'] = 'true';
      res.writeHead(status, headers).end(JSON.stringify(body));
    });
});

server.listen(PORT, '127.0.0.1', () => {
  console.log(`downstream listening on http://127.0.0.1:${server.address().port}`);
});

for (const signal of ['SIGTERM', 'SIGINT']) {
  process.once(signal, () => server.close(() => db.close(() => process.exit(0))));
}
