// A typed client for the receiver's HTTP API: record an effect under a fencing token (signed when
// given the secret) and read back what was recorded. Error answers come back as the same
// ReceiverError the receiver rendered; an unreachable receiver is `receiver_unavailable`.
import { urlUnder } from '../platform/exchange.js';
import { JsonPeer, type JsonPeerOptions, type PeerCallOptions } from '../platform/json-peer.js';
import { isReceiverErrorCode, ReceiverError, type ReceiverErrorCode } from './errors.js';
import type { Effect } from './rules.js';
import { FENCING_TOKEN_HEADER, SIGNATURE_HEADER, signatureHeader } from './signature.js';
import type { JournalEntry, PageQuery, Totals } from './store.js';

export interface ReceiverClientOptions {
  /** Per-request timeout (default 10 s); a call's own `timeoutMs` overrides it. */
  timeoutMs?: number;
  /** Shared with the caller, who closes it; without one the client makes its own and closes it on close(). */
  agent?: JsonPeerOptions['agent'];
}

/**
 * The last, optional argument of every read. Aborting `signal` rejects the call with
 * `signal.reason`; running out of `timeoutMs` is `receiver_unavailable`.
 */
export interface ReceiverCallOptions extends Pick<PeerCallOptions, 'signal' | 'timeoutMs'> {
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

export class ReceiverClient extends JsonPeer<ReceiverError> {
  constructor(baseUrl: string, options: ReceiverClientOptions = {}) {
    super(baseUrl, options, { timeoutMs: 10_000, maxAnswerBytes: MAX_ANSWER_BYTES }, RECEIVER_ERRORS);
  }

  /**
   * `POST /effects`: the effect is recorded once per job. A lower token than one already seen is
   * `fenced` (409), another qty for a recorded job is `conflict` (422); both are ReceiverErrors
   * with the receiver's details. Repeating a call whose answer was lost is safe: it is a duplicate.
   */
  async record(input: { jobId: string; qty: number }, options: RecordOptions): Promise<RecordOutcome> {
    const { token, signature, secret, signal, timeoutMs } = options;
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
    return this.answer<RecordOutcome>({ method: 'POST', path: ['effects'], body, headers, signal, timeoutMs });
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
    return this.answer<EffectsPage>({ ...options, method: 'GET', path: ['effects'], query: pageQuery(page) });
  }

  /** The effect recorded for `jobId`, or undefined when none was. */
  async effect(jobId: string, options?: ReceiverCallOptions): Promise<Effect | undefined> {
    try {
      return (await this.answer<{ effect: Effect }>({ ...options, method: 'GET', path: ['effects', jobId] })).effect;
    } catch (err) {
      if (err instanceof ReceiverError && err.code === 'unknown_effect') return undefined;
      throw err;
    }
  }

  async totals(options?: ReceiverCallOptions): Promise<Totals> {
    return this.answer<Totals>({ ...options, method: 'GET', path: ['totals'] });
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
    return this.answer<JournalPage>({ ...options, method: 'GET', path: ['journal'], query: pageQuery(page) });
  }
}

/** How the receiver's client words what went wrong. */
const RECEIVER_ERRORS = {
  service: 'receiver',
  isCode: isReceiverErrorCode,
  create: (code: string, message: string, details: Record<string, unknown>, status?: number) =>
    new ReceiverError(code as ReceiverErrorCode, message, details, status),
  unavailable: 'receiver_unavailable',
  afterTimeout: 'a record may or may not have been applied: send it again, a repeat is a duplicate.',
};
