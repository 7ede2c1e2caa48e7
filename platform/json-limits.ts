// The limits every service holds a JSON request body to, and the one pass over its bytes that
// counts its keys and depth before it is parsed. No express here: the clients (the worker
// library's coalescers) size their batches by the same limits and the same count.

/** Every body is at most 1 MiB; exactly 1 MiB is accepted. */
export const BODY_LIMIT_BYTES = 1024 * 1024;

/** The deepest JSON a body may hold: `{"a":1}` is 1 deep. Deeper is 400, before any schema recurses into it. */
export const MAX_JSON_DEPTH = 64;

/**
 * The most object keys a body may hold, all its objects together. Building and checking an
 * object costs far more per key than a string costs per byte (90,000 keys in 1 MiB take the
 * event loop hundreds of milliseconds), so keys are counted in the bytes, before JSON.parse.
 */
export const MAX_JSON_KEYS = 10_000;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;
export const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
export const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
/** `__proto__` as UTF-8 bytes. */
const PROTO = Buffer.from('__proto__');

/**
 * The object keys in the JSON text `bytes` (UTF-8): in JSON a `:` outside a string follows a
 * key and nothing else. A scan of the bytes, so counting costs no parse; for text that is not
 * JSON the count means nothing, and the parse refuses it.
 */
export function jsonKeyCount(bytes: Uint8Array): number {
  return scanJson(bytes).keys;
}

export interface JsonScan {
  keys: number;
  /** The deepest nesting of objects and arrays: `jsonDeeperThan`'s depth, for text that parses. */
  depth: number;
  /** Whether a key could be `__proto__`: one spelled so, or one written with an escape. */
  maybeProto: boolean;
  /** The first byte that is not JSON whitespace (a BOM skipped), or -1. */
  first: number;
}

/** One pass over JSON text: its keys, its depth, whether a key may be `__proto__`, its first byte. */
export function scanJson(bytes: Uint8Array): JsonScan {
  let keys = 0;
  let depth = 0;
  let deepest = 0;
  let maybeProto = false;
  let first = -1;
  // The last string closed: where its text began and ended, and whether it held an escape.
  let stringStart = 0;
  let stringEnd = 0;
  let escaped = false;
  const start = bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf ? 3 : 0;
  for (let i = start; i < bytes.length; i++) {
    const byte = bytes[i]!;
    if (first === -1 && byte !== 0x20 && byte !== 0x09 && byte !== 0x0a && byte !== 0x0d) first = byte;
    if (byte === QUOTE) {
      stringStart = i + 1;
      escaped = false;
      for (i++; i < bytes.length; i++) {
        const inner = bytes[i];
        if (inner === BACKSLASH) {
          escaped = true;
          i++;
        } else if (inner === QUOTE) break;
      }
      stringEnd = i;
    } else if (byte === COLON) {
      keys++;
      if (escaped || (stringEnd - stringStart === PROTO.length && PROTO.equals(bytes.subarray(stringStart, stringEnd))))
        maybeProto = true;
    } else if (byte === OPEN_BRACE || byte === OPEN_BRACKET) {
      if (++depth > deepest) deepest = depth;
    } else if (byte === CLOSE_BRACE || byte === CLOSE_BRACKET) depth--;
  }
  return { keys, depth: deepest, maybeProto, first };
}
