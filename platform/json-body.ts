// Request bodies, read the same way by the three services: JSON only, declared as such, at most
// 1 MiB once decompressed, at most MAX_JSON_DEPTH deep and MAX_JSON_KEYS keys, no `__proto__`.
// A body sent as most are (a Content-Length, no Content-Encoding, UTF-8) is read here in one
// pass: its bytes collected, scanned once for keys, depth and a possible `__proto__`, then
// parsed. Every other body (chunked, compressed, another charset) goes through express's own
// parsers, body-parser, and is held to the same limits after it.
import { AsyncResource } from 'node:async_hooks';
import { isUtf8 } from 'node:buffer';
import express, { type Request, type RequestHandler } from 'express';
import {
  BODY_LIMIT_BYTES,
  jsonKeyCount,
  MAX_JSON_DEPTH,
  MAX_JSON_KEYS,
  OPEN_BRACE,
  OPEN_BRACKET,
  scanJson,
} from './json-limits.js';

export { BODY_LIMIT_BYTES, jsonKeyCount, MAX_JSON_DEPTH, MAX_JSON_KEYS } from './json-limits.js';

/**
 * JSON bodies: a body must be declared `application/json` (or a `+json` type), so a browser page
 * cannot send one with a cross-site "simple" request, which may only be text/plain or a form;
 * at most 1 MiB once decompressed, and at most MAX_JSON_DEPTH deep.
 */
export function jsonBody(): RequestHandler {
  const parse = express.json({ limit: BODY_LIMIT_BYTES, type: () => true, verify: refuseManyKeys });
  return (req, res, next) => {
    const refused = mediaTypeRefusal(req);
    if (refused) return next(refused);
    const length = plainLength(req, true);
    if (length === undefined) {
      return parse(req, res, (err?: unknown) => {
        if (err !== undefined) return next(readFailure(err));
        if (jsonDeeperThan(req.body, MAX_JSON_DEPTH)) return next(tooDeep());
        if (hasProtoKey(req.body)) return next(protoKey());
        next();
      });
    }
    if (!('body' in (req as object))) req.body = undefined;
    if (length === null) return next();
    readBytes(req, length, (err, bytes) => {
      if (err !== undefined) return next(err);
      const failure = parseJsonBytes(bytes!, req);
      next(failure);
    });
  };
}

/**
 * The body's bytes as sent (decompressed, at most 1 MiB) as a Buffer in `req.body`, for a route
 * that must see them as they are (a signature covers them) and parses them itself, holding them
 * to MAX_JSON_DEPTH with `jsonDeeperThan`. Held to the same media types as `jsonBody`.
 */
export function rawJsonBody(): RequestHandler {
  const read = express.raw({ limit: BODY_LIMIT_BYTES, type: () => true, verify: refuseNotUtf8 });
  return (req, res, next) => {
    const refused = mediaTypeRefusal(req);
    if (refused) return next(refused);
    const length = plainLength(req, false);
    if (length === undefined) {
      return read(req, res, (err?: unknown) => next(err === undefined ? undefined : readFailure(err)));
    }
    if (!('body' in (req as object))) req.body = undefined;
    if (length === null) return next();
    readBytes(req, length, (err, bytes) => {
      if (err !== undefined) return next(err);
      if (!isUtf8(bytes!)) return next(notUtf8());
      req.body = bytes;
      next();
    });
  };
}

/** `application/json`, or any `<type>/<subtype>+json` (`application/merge-patch+json`...). */
const JSON_MEDIA_TYPE = /^(?:application\/json|[\w.!#$&^+-]+\/[\w.!#$&^+-]+\+json)$/i;

/** Methods that read only; every other method may change state. */
const READ_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * A request that may change state (a POST...), with a body or without one, must declare a JSON
 * body: a browser page can send a bodiless or text/plain POST cross-site without a preflight,
 * but not one declared JSON. A read (GET, HEAD) without a body needs no type.
 */
function mediaTypeRefusal(req: Request): Error | undefined {
  const declared = req.headers['content-type'];
  const length = req.headers['content-length'];
  const hasBody = req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
  if (declared === undefined && !hasBody && READ_METHODS.has(req.method)) return undefined;
  const mediaType = (declared ?? '').split(';', 1)[0]!.trim();
  if (JSON_MEDIA_TYPE.test(mediaType)) return undefined;
  return edgeError(
    'media.unsupported',
    declared === undefined ? 'no Content-Type' : `Content-Type ${JSON.stringify(mediaType)}`,
  );
}

/** A Content-Length as digits alone, at most 7 of them (the limit, 1 MiB, has 7). */
const PLAIN_LENGTH = /^\d{1,7}$/;
/** A Content-Type without parameters, or with `charset=utf-8` alone. */
const UTF8_TYPE = /^[^;]*(?:;[ \t]*charset=(?:utf-8|"utf-8")[ \t]*)?$/i;

/**
 * How a body is read here rather than by body-parser: `null` when there is none (no
 * Content-Length, no Transfer-Encoding), its length when it is sent plainly (a Content-Length
 * within the limit, no Content-Encoding, UTF-8 when `text`), and undefined for everything else,
 * which body-parser reads as it always has.
 */
function plainLength(req: Request, text: boolean): number | null | undefined {
  const { headers } = req;
  if (headers['transfer-encoding'] !== undefined || headers['content-encoding'] !== undefined) return undefined;
  if (!req.readable || req.socket?.readable === false) return undefined;
  const length = headers['content-length'];
  if (length === undefined) return null;
  if (!PLAIN_LENGTH.test(length)) return undefined;
  const bytes = Number(length);
  if (bytes > BODY_LIMIT_BYTES) return undefined;
  if (text && headers['content-type'] !== undefined && !UTF8_TYPE.test(headers['content-type'])) return undefined;
  return bytes;
}

/** Collects the body's `length` bytes; fails as raw-body does when the caller hangs up first. */
function readBytes(req: Request, length: number, callback: (err: Error | undefined, bytes?: Buffer) => void): void {
  // Called back in the request's async context (its request id), not the socket's, as raw-body
  // does. One resource per request: AsyncResource.bind would also define accessor properties on
  // the bound function at every call, a measurable share of a small request's CPU.
  const resource = new AsyncResource('leasehold.body');
  const done = (err: Error | undefined, bytes?: Buffer) => resource.runInAsyncScope(callback, undefined, err, bytes);
  const chunks: Buffer[] = [];
  let received = 0;
  const onData = (chunk: Buffer) => {
    received += chunk.length;
    chunks.push(chunk);
  };
  const onEnd = () => {
    cleanup();
    if (received !== length) done(edgeError('request.size.invalid', 'request size did not match content length'));
    else done(undefined, Buffer.concat(chunks, received));
  };
  const onAborted = () => {
    cleanup();
    done(edgeError('request.aborted', 'request aborted'));
  };
  const onError = (err: Error) => {
    cleanup();
    done(err);
  };
  const cleanup = () => {
    req.off('aborted', onAborted);
    req.off('data', onData);
    req.off('end', onEnd);
    req.off('error', onError);
    req.off('close', cleanup);
  };
  req.on('aborted', onAborted);
  req.on('close', cleanup);
  req.on('data', onData);
  req.on('end', onEnd);
  req.on('error', onError);
}

/**
 * Parses a UTF-8 body into `req.body` as body-parser's JSON parser would (a leading BOM dropped,
 * an empty body read as `{}`, only an object or an array at the top), held to the edge's limits;
 * the refusal, if any.
 */
function parseJsonBytes(bytes: Buffer, req: Request): Error | undefined {
  if (!isUtf8(bytes)) return notUtf8();
  const scan = scanJson(bytes);
  if (scan.keys > MAX_JSON_KEYS) return edgeError('entity.too.many.keys', String(scan.keys));
  const start = bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf ? 3 : 0;
  if (start === bytes.length) {
    req.body = {};
    return undefined;
  }
  if (scan.first !== OPEN_BRACE && scan.first !== OPEN_BRACKET) return scalarRefusal(bytes.toString('utf8', start));
  let value: unknown;
  try {
    value = JSON.parse(bytes.toString('utf8', start));
  } catch (err) {
    return edgeError('entity.parse.failed', (err as Error).message);
  }
  if (scan.depth > MAX_JSON_DEPTH) return tooDeep();
  if (scan.maybeProto && hasProtoKey(value)) return protoKey();
  req.body = value;
  return undefined;
}

/**
 * A body that is not an object or an array at the top, refused as body-parser's strict parser
 * refuses it: a parse failure that carries the text as `body`, from which the edge tells a JSON
 * value (`null`, `"x"`, `3`) from broken JSON (http-edge.ts).
 */
function scalarRefusal(text: string): Error {
  return Object.assign(edgeError('entity.parse.failed', 'not an object or an array'), { body: text });
}

/** body-parser's `verify` of a raw body: the bytes must be UTF-8, as they are for `jsonBody`. */
function refuseNotUtf8(_req: unknown, _res: unknown, bytes: Buffer): void {
  if (!isUtf8(bytes)) throw notUtf8();
}

/**
 * A body whose bytes are not UTF-8 (Latin-1 sent as JSON, say). Decoded anyway, each bad byte
 * would become U+FFFD, so `"Müller"` and `"Möller"` in Latin-1 would be one id.
 */
function notUtf8(): Error {
  return edgeError('entity.utf8.invalid', 'not UTF-8');
}

/** body-parser's `verify`: the raw bytes, before they are parsed. */
function refuseManyKeys(_req: unknown, _res: unknown, bytes: Buffer): void {
  if (!isUtf8(bytes)) throw notUtf8();
  const keys = jsonKeyCount(bytes);
  if (keys > MAX_JSON_KEYS) throw edgeError('entity.too.many.keys', String(keys));
}

/** A body that could not be read: body-parser's own errors keep their `type`; a stream that fails to decompress gets one. */
function readFailure(err: unknown): unknown {
  const e = err as { type?: unknown; status?: unknown; message?: unknown } | null;
  // The only untyped failures of a body read come from the decompression stream (zlib, brotli).
  if (e && e.type === undefined && e.status === 400) {
    return edgeError('encoding.failed', String(e.message), { cause: err });
  }
  return err;
}

function tooDeep(): Error {
  return edgeError('entity.too.deep', `deeper than ${MAX_JSON_DEPTH}`);
}

function protoKey(): Error {
  return edgeError('entity.proto.key', '"__proto__"');
}

/** An error the edge knows by its `type`, as body-parser marks its own. */
function edgeError(type: string, message: string, options?: ErrorOptions): Error {
  return Object.assign(new Error(message, options), { type });
}

/**
 * Whether an object in `value` has a key `__proto__`. JSON.parse keeps it as a plain key, but
 * the schemas' copies drop it (an assignment to `__proto__` sets the prototype), so a payload
 * would lose it silently; it is refused instead. Walked without recursion.
 */
export function hasProtoKey(value: unknown): boolean {
  const stack: unknown[] = [value];
  for (let node = stack.pop(); node !== undefined; node = stack.pop()) {
    if (node === null || typeof node !== 'object') continue;
    if (!Array.isArray(node) && Object.hasOwn(node, '__proto__')) return true;
    for (const child of Array.isArray(node) ? node : Object.values(node)) {
      if (child !== null && typeof child === 'object') stack.push(child);
    }
  }
  return false;
}

/** Whether `value` nests objects and arrays deeper than `max`; walked without recursion, so any depth is safe to check. */
export function jsonDeeperThan(value: unknown, max: number): boolean {
  const stack: Array<{ node: unknown; depth: number }> = [{ node: value, depth: 1 }];
  for (let next = stack.pop(); next !== undefined; next = stack.pop()) {
    const { node, depth } = next;
    if (node === null || typeof node !== 'object') continue;
    if (depth > max) return true;
    for (const child of Array.isArray(node) ? node : Object.values(node)) {
      if (child !== null && typeof child === 'object') stack.push({ node: child, depth: depth + 1 });
    }
  }
  return false;
}
