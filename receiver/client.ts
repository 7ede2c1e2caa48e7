// A typed client for the receiver's HTTP API: record an effect under a fencing token (signed when
// given the secret) and read back what was recorded. Error answers come back as the same
// ReceiverError the receiver rendered; an unreachable receiver is `receiver_unavailable`.
import type http from 'node:http';
import {
  checkedTimeoutMs,
  errorInBody,
  exchange,
  keepAliveAgent,
  urlUnder,
  type Exchange,
} from '../platform/exchange.js';
import { isReceiverErrorCode, ReceiverError } from './errors.js';
import type { Effect } from './rules.js';
import { FENCING_TOKEN_HEADER, SIGNATURE_HEADER, signatureHeader } from './signature.js';
import type { JournalEntry, PageQuery, Totals } from './store.js';

export interface ReceiverClientOptions {
  /** Per-request timeout (default 10 s); a call's own `timeoutMs` overrides it. */
  timeoutMs?: number;
  agent?: http.Agent;
}

/**
 * The last, optional argument of every read. Aborting `signal` rejects the call with
 * `signal.reason`; running out of `timeoutMs` is `receiver_unavailable`.
 */
export interface ReceiverCallOptions {
  signal?: AbortSignal | undefined;
  timeoutMs?: number | undefined;
}

/** How one record is fenced and, for a receiver started with a secret, signed. */
export interface RecordOptions extends ReceiverCallOptions {
  /** The current lease's fencing token, sent as `Fencing-Token`. */
  token: number;
  /**
   * A `Leasehold-Signature` computed by the caller (`signatureHeader`) over `POST`, the path the
   * client posts to (`<base path>/effects`), the token and `JSON.stringify({jobId, qty})`; or give
   * `secret` instead and the client signs each request as it sends it.
   */
  signature?: string;
  secret?: string;
}

export interface RecordOutcome {
  outcome: 'applied' | 'duplicate';
  /** The effect as recorded: for a duplicate, the first one, with its token and time. */
  effect: Effect;
}

type JsonResponse = Extract<Exchange, { kind: 'response' }>;

export interface EffectsPage {
  effects: Effect[];
  /** The jobId to ask for the next page `after`, or null after the last page. */
  next: string | null;
}

export interface JournalPage {
  journal: JournalEntry[];
  /** The seq to ask for the next page `after`, or null after the last page. */
  next: number | null;
}

/** The longest page the receiver gives: how `effects()` and `journal()` read a whole listing. */
const MAX_PAGE = 1_000;

/** A page of 1000 effects with 256-character ids is under 1 MiB; the cap leaves ample room. */
const MAX_ANSWER_BYTES = 16 * 1024 * 1024;

function pageQuery(page: PageQuery<string | number>): URLSearchParams {
  const query = new URLSearchParams();
  if (page.after !== undefined) query.set('after', String(page.after));
  if (page.limit !== undefined) query.set('limit', String(page.limit));
  return query;
}

export class ReceiverClient {
  readonly baseUrl: URL;
  private readonly agent: http.Agent;
  private readonly ownsAgent: boolean;
  private readonly timeoutMs: number;

  constructor(baseUrl: string, options: ReceiverClientOptions = {}) {
    this.baseUrl = new URL(baseUrl);
    this.agent = options.agent ?? keepAliveAgent();
    this.ownsAgent = options.agent === undefined;
    this.timeoutMs = checkedTimeoutMs(options.timeoutMs ?? 10_000);
  }

  /**
   * `POST /effects`: the effect is recorded once per job. A lower token than one already seen is
   * `fenced` (409), another qty for a recorded job is `conflict` (422); both are ReceiverErrors
   * with the receiver's details. Repeating a call whose answer was lost is safe: it is a duplicate.
   */
  async record(input: { jobId: string; qty: number }, options: RecordOptions): Promise<RecordOutcome> {
    const { token, signature, secret } = options;
    if (signature !== undefined && secret !== undefined) {
      throw new RangeError('Give record either a signature or the secret to sign with, not both.');
    }
    const body = Buffer.from(JSON.stringify({ jobId: input.jobId, qty: input.qty }));
    const headers: Record<string, string> = { [FENCING_TOKEN_HEADER]: String(token) };
    const url = urlUnder(this.baseUrl, ['effects']);
    const signed =
      secret !== undefined
        ? signatureHeader(secret, { method: 'POST', path: `${url.pathname}${url.search}`, token, body }, Date.now())
        : signature;
    if (signed !== undefined) headers[SIGNATURE_HEADER] = signed;
    const res = await this.call('POST', ['effects'], options, { body, headers });
    return res.body as RecordOutcome;
  }

  /** Every recorded effect, by jobId: the pages of `effectsPage`, read one after another. */
  async effects(options?: ReceiverCallOptions): Promise<Effect[]> {
    const effects: Effect[] = [];
    let after: string | undefined;
    do {
      const page = await this.effectsPage(
        after === undefined ? { limit: MAX_PAGE } : { after, limit: MAX_PAGE },
        options,
      );
      effects.push(...page.effects);
      after = page.next ?? undefined;
    } while (after !== undefined);
    return effects;
  }

  /**
   * One page of effects, by jobId: at most `limit` (default 100, at most 1000) after the jobId
   * `after`. `next` is the `after` of the next page, or null after the last.
   */
  async effectsPage(page: PageQuery<string> = {}, options?: ReceiverCallOptions): Promise<EffectsPage> {
    return (await this.call('GET', ['effects'], options, {}, pageQuery(page))).body as EffectsPage;
  }

  /** The effect recorded for `jobId`, or undefined when none was. */
  async effect(jobId: string, options?: ReceiverCallOptions): Promise<Effect | undefined> {
    try {
      return ((await this.call('GET', ['effects', jobId], options)).body as { effect: Effect }).effect;
    } catch (err) {
      if (err instanceof ReceiverError && err.code === 'unknown_effect') return undefined;
      throw err;
    }
  }

  async totals(options?: ReceiverCallOptions): Promise<Totals> {
    return (await this.call('GET', ['totals'], options)).body as Totals;
  }

  /** Every judged request still kept, outcome included, in the order it was judged: the pages of `journalPage`. */
  async journal(options?: ReceiverCallOptions): Promise<JournalEntry[]> {
    const journal: JournalEntry[] = [];
    let after: number | undefined;
    do {
      const page = await this.journalPage(
        after === undefined ? { limit: MAX_PAGE } : { after, limit: MAX_PAGE },
        options,
      );
      journal.push(...page.journal);
      after = page.next ?? undefined;
    } while (after !== undefined);
    return journal;
  }

  /**
   * One page of the journal, in order: at most `limit` (default 100, at most 1000) entries after
   * the seq `after`. `next` is the `after` of the next page, or null after the last.
   */
  async journalPage(page: PageQuery<number> = {}, options?: ReceiverCallOptions): Promise<JournalPage> {
    return (await this.call('GET', ['journal'], options, {}, pageQuery(page))).body as JournalPage;
  }

  /** False when the receiver does not answer 200; an aborted call still rejects with the signal's reason. */
  async healthy(options?: ReceiverCallOptions): Promise<boolean> {
    try {
      return (await this.call('GET', ['healthz'], options)).status === 200;
    } catch (err) {
      if (err instanceof ReceiverError) return false;
      throw err;
    }
  }

  close(): void {
    if (this.ownsAgent) this.agent.destroy();
  }

  private async call(
    method: 'GET' | 'POST',
    path: readonly string[],
    options: ReceiverCallOptions = {},
    send: { body?: Buffer; headers?: Record<string, string> } = {},
    query?: URLSearchParams,
  ): Promise<JsonResponse> {
    const timeoutMs = options.timeoutMs === undefined ? this.timeoutMs : checkedTimeoutMs(options.timeoutMs);
    const res = await exchange({
      method,
      url: urlUnder(this.baseUrl, path, query),
      ...send,
      timeoutMs,
      agent: this.agent,
      signal: options.signal,
      maxAnswerBytes: MAX_ANSWER_BYTES,
    });
    switch (res.kind) {
      case 'response':
        if (res.status < 400) return res;
        throw errorFromResponse(res);
      case 'aborted':
        throw options.signal?.reason ?? new DOMException('The call was aborted.', 'AbortError');
      case 'timeout':
        throw new ReceiverError(
          'receiver_unavailable',
          `The receiver at ${this.baseUrl.origin} did not answer within ${timeoutMs} ms; ` +
            'a record may or may not have been applied: send it again, a repeat is a duplicate.',
          { cause: `no answer within ${timeoutMs} ms` },
        );
      default:
        throw new ReceiverError(
          'receiver_unavailable',
          `The receiver at ${this.baseUrl.origin} could not be reached (${res.code}: ${res.message}).`,
          { cause: res.message },
        );
    }
  }
}

/** Rebuilds the receiver's ReceiverError from an error answer; the status is the one answered. */
function errorFromResponse(res: JsonResponse): ReceiverError {
  const error = errorInBody(res.body);
  if (error && isReceiverErrorCode(error.code)) {
    return new ReceiverError(
      error.code,
      error.message ?? `The receiver answered ${res.status} ${error.code}.`,
      error.details,
      res.status,
    );
  }
  return new ReceiverError(
    res.status >= 500 ? 'internal' : 'invalid_request',
    `The receiver answered ${res.status} without a recognisable error body.`,
    { status: res.status },
  );
}
