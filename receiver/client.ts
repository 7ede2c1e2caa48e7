// A typed client for the receiver's HTTP API: record an effect under a fencing token (signed when
// given the secret) and read back what was recorded. Error answers come back as the same
// ReceiverError the receiver rendered; an unreachable receiver is `receiver_unavailable`.
import { urlUnder } from '../platform/exchange.js';
import { checkOptionNames, type OptionNames } from '../platform/option-names.js';
import { JsonPeer, type JsonPeerOptions, type PeerCallOptions, type PeerErrors } from '../platform/json-peer.js';
import { RECEIVER_ERROR_STATUS, ReceiverError } from './errors.js';
import type { Effect } from './rules.js';
import { FENCING_TOKEN_HEADER, SIGNATURE_HEADER, signatureHeader } from './signature.js';
import type { JournalEntry, PageQuery, Totals } from './store.js';

/** What `record` sends: the fields given, in this order, as the gateway forwards them. */
export interface EffectInput {
  jobId: string;
  /** Names one of the job's effects; left out, the job's default effect. */
  key?: string;
  /** An integer >= 1; may be left out when `body` is given. */
  qty?: number;
  /** Any JSON value, at most 64 KiB serialized. */
  body?: unknown;
}

/** A read of one effect: the job's default effect, or with `key` its keyed effect. */
export interface EffectReadOptions extends ReceiverCallOptions {
  key?: string;
}

/** The effects listing's filter: every job's effects, or only `jobId`'s. */
export interface EffectsQuery extends PageQuery<string> {
  jobId?: string;
}

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
   * client posts to (`<base path>/effects`), the token and the body it sends,
   * `JSON.stringify({jobId, key, qty, body})` with the fields left out omitted; or give `secret`
   * instead and the client signs each request as it sends it.
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
  /** The cursor to ask for the next page `after`, or null after the last page. */
  next: string | null;
}

export interface JournalPage {
  journal: JournalEntry[];
  /** The seq to ask for the next page `after`, or null after the last page. */
  next: number | null;
}

/** The longest page the receiver gives: how `effects()` and `journal()` read a whole listing. */
const MAX_PAGE = 1_000;

/**
 * A page of 1000 effects or journal entries, each with a 64 KiB body and 256-character ids, is
 * under 70 MiB; the cap leaves room and still bounds what a peer can make the client hold.
 */
const MAX_ANSWER_BYTES = 80 * 1024 * 1024;

function pageQuery(page: PageQuery<string | number> & { jobId?: string }): URLSearchParams {
  const query = new URLSearchParams();
  if (page.jobId !== undefined) query.set('jobId', page.jobId);
  if (page.after !== undefined) query.set('after', String(page.after));
  if (page.limit !== undefined) query.set('limit', String(page.limit));
  return query;
}

const RECEIVER_CLIENT_OPTION_NAMES: OptionNames<ReceiverClientOptions> = { timeoutMs: true, agent: true };

export class ReceiverClient extends JsonPeer<ReceiverError> {
  constructor(baseUrl: string, options: ReceiverClientOptions = {}) {
    super(
      baseUrl,
      checkOptionNames('ReceiverClient', options, RECEIVER_CLIENT_OPTION_NAMES),
      { timeoutMs: 10_000, maxAnswerBytes: MAX_ANSWER_BYTES },
      RECEIVER_ERRORS,
    );
  }

  /**
   * `POST /effects`: the effect is recorded once per `(jobId, key)`. A lower token than the job's
   * highest (by any of its effects) is `fenced` (409), another qty or body for a recorded effect
   * is `conflict` (422); both are ReceiverErrors with the receiver's details. Repeating a call
   * whose answer was lost is safe: it is a duplicate.
   */
  async record(input: EffectInput, options: RecordOptions): Promise<RecordOutcome> {
    const { token, signature, secret, signal, timeoutMs } = options;
    if (signature !== undefined && secret !== undefined) {
      throw new RangeError('Give record either a signature or the secret to sign with, not both.');
    }
    const { jobId, key, qty, body: effectBody } = input;
    const body = Buffer.from(JSON.stringify({ jobId, key, qty, body: effectBody }));
    const headers: Record<string, string> = { [FENCING_TOKEN_HEADER]: String(token) };
    const url = urlUnder(this.baseUrl, ['effects']);
    const signed =
      secret !== undefined
        ? signatureHeader(secret, { method: 'POST', path: `${url.pathname}${url.search}`, token, body }, Date.now())
        : signature;
    if (signed !== undefined) headers[SIGNATURE_HEADER] = signed;
    return this.answer<RecordOutcome>({ method: 'POST', path: ['effects'], body, headers, signal, timeoutMs });
  }

  /**
   * Every recorded effect, by jobId and key, or with `jobId` only that job's (its default effect
   * first): the pages of `effectsPage`, read one after another.
   */
  async effects(options: ReceiverCallOptions & { jobId?: string } = {}): Promise<Effect[]> {
    const { jobId: only, ...call } = options;
    const effects: Effect[] = [];
    const jobId = only === undefined ? {} : { jobId: only };
    let after: string | undefined;
    do {
      const page = await this.effectsPage(
        after === undefined ? { ...jobId, limit: MAX_PAGE } : { ...jobId, after, limit: MAX_PAGE },
        call,
      );
      effects.push(...page.effects);
      after = page.next ?? undefined;
    } while (after !== undefined);
    return effects;
  }

  /**
   * One page of effects, by jobId and key, of every job or of `jobId`'s: at most `limit`
   * (default 100, at most 1000) after the cursor `after`. `next` is the `after` of the next page,
   * or null after the last.
   */
  async effectsPage(page: EffectsQuery = {}, options?: ReceiverCallOptions): Promise<EffectsPage> {
    return this.answer<EffectsPage>({ ...options, method: 'GET', path: ['effects'], query: pageQuery(page) });
  }

  /** The effect recorded for `jobId` (with `key`, its keyed effect), or undefined when none was. */
  async effect(jobId: string, options: EffectReadOptions = {}): Promise<Effect | undefined> {
    const { key, ...call } = options;
    const query = key === undefined ? undefined : new URLSearchParams({ key });
    try {
      return (await this.answer<{ effect: Effect }>({ ...call, method: 'GET', path: ['effects', jobId], query }))
        .effect;
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
const RECEIVER_ERRORS: PeerErrors<ReceiverError> = {
  service: 'receiver',
  table: RECEIVER_ERROR_STATUS,
  create: (code, message, details, status) => new ReceiverError(code, message, details, status),
  afterTimeout: 'a record may or may not have been applied: send it again, a repeat is a duplicate.',
};
