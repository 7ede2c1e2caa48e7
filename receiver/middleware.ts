// `fencedEffects`: the receiver's fencing-and-idempotency rule as one express router, so a
// real downstream can put its own effect behind it. The receiver's own POST /effects uses it.
import express, { type ErrorRequestHandler, type Request, type Response, type Router } from 'express';
import { pino, type Logger } from 'pino';
import { BODY_LIMIT_BYTES, edgeFailureOf, errorRenderer, rawJsonBody } from '../platform/http-edge.js';
import { ReceiverError } from './errors.js';
import type { EffectMetrics } from './metrics.js';
import { parseBatchBody, parseEffectBody, parseFencingToken } from './schemas.js';
import type { Clock, EffectRequest } from './rules.js';
import { checkClock } from '../platform/clock.js';
import { describeValue } from '../platform/describe-value.js';
import { checkOptionNames, type OptionNames } from '../platform/option-names.js';
import { answerOf, refusalOf } from './answers.js';
import { BATCH_HEADER, batchTargetOf, isBatchTarget, judgeBatch } from './batch.js';
import { BATCH_TOKEN, FENCING_TOKEN_HEADER, SIGNATURE_HEADER, verifySignature } from './signature.js';
import { recordEffect, type ApplyEffect, type EffectStore, type Recorded } from './store.js';

export { refusalOf } from './answers.js';
export { BATCH_HEADER } from './batch.js';

export const IDEMPOTENT_REPLAYED_HEADER = 'Idempotent-Replayed';
export const BODY_LIMIT = BODY_LIMIT_BYTES;

export interface FencedEffectsOptions<Tx> {
  store: EffectStore<Tx>;
  /** Defaults to the system clock. */
  clock?: Clock;
  /** When set, every request must carry a valid Leasehold-Signature (401 otherwise). */
  secret?: string | undefined;
  /**
   * Performs the effect, once per job, inside the transaction that records it. Write through
   * `tx` to make the effect and its record one commit. Not called for duplicates, fenced or
   * conflicts. Throwing rolls the record back, and what is thrown reaches the store as it is:
   * an error the store counts as transient (a deadlock or serialization failure on PostgreSQL,
   * SQLITE_BUSY) runs the whole transaction again, judgement included, so `apply` may run
   * again; past the store's retries it is `503 busy`, as is an error the store reads as its
   * database being unreachable (a refused or reset connection). A `ReceiverError` is the
   * answer as thrown. Anything else is `500 apply_failed`, and the caller may retry.
   */
  apply?: ApplyEffect<Tx>;
  /**
   * Default: errors only, as JSON lines on stderr (an `apply` that threw, an unexpected error), so
   * that a 500's cause is written somewhere; `pino({level: 'silent'})` writes nothing.
   */
  logger?: Logger;
  /** Told of each outcome and each refused signature (the receiver's /metrics; `effectMetrics`). */
  metrics?: EffectMetrics;
}

/** The stores already speak ReceiverError (`busy` for a database that stays locked or unreachable). */
export function toReceiverError(err: unknown): ReceiverError {
  return err instanceof ReceiverError ? err : ReceiverError.fromEdge(edgeFailureOf(err, 'receiver'));
}

/** The receiver's error middleware, for an app that mounts fencedEffects beside routes of its own. */
export function receiverErrors(logger: Logger): ErrorRequestHandler {
  return errorRenderer(toReceiverError, logger);
}

/**
 * `apply` for one request, remembering what its latest call threw. `undefined` is thrown as an
 * Error instead, since knex replaces an undefined rejection with an Error of its own, which
 * would no longer be recognised as this one.
 */
function trackFailures<Tx>(apply: ApplyEffect<Tx>): { apply: ApplyEffect<Tx>; threw(err: unknown): boolean } {
  let failure: { err: unknown } | undefined;
  return {
    async apply(effect, tx) {
      failure = undefined;
      try {
        await apply(effect, tx);
      } catch (thrown) {
        const err = thrown === undefined ? new Error('apply threw undefined') : thrown;
        failure = { err };
        throw err;
      }
    },
    threw: (err) => failure !== undefined && failure.err === err,
  };
}

function rawBodyOf(req: Request): Buffer | undefined {
  if (req.body === undefined || Buffer.isBuffer(req.body)) return req.body as Buffer | undefined;
  // A JSON parser mounted earlier consumed the bytes; the signature needs them as sent.
  throw new Error('fencedEffects needs the raw request body: mount it before any body parser (e.g. express.json()).');
}

/** A store made by one of the receiver's openers; a promise of one is named, since it is the usual slip. */
function checkEffectStore(store: unknown): void {
  const open = 'openSqliteEffectStore, openPostgresEffectStore or createKnexEffectStore';
  if (typeof (store as { then?: unknown } | undefined)?.then === 'function') {
    throw new TypeError(`fencedEffects: store is a promise; await ${open} before passing its store.`);
  }
  if (typeof (store as { record?: unknown } | undefined)?.record !== 'function') {
    throw new TypeError(`fencedEffects: store must be an effect store (from ${open}), not ${describeValue(store)}.`);
  }
}

const FENCED_EFFECTS_OPTION_NAMES: OptionNames<FencedEffectsOptions<unknown>> = {
  store: true,
  clock: true,
  secret: true,
  apply: true,
  logger: true,
  metrics: true,
};

/**
 * A router for one route (`app.post('/effects', fencedEffects({store}))`): reads the body
 * (declared JSON, 1 MiB at most), checks the Fencing-Token header, the signature (over the
 * method, the path as sent, the token and the body) when a secret is set, and the
 * body, then judges and records the request in one store transaction and answers
 * `201 applied`, `200 duplicate` (+ `Idempotent-Replayed: true`), `409 fenced` or
 * `422 conflict`. Errors are rendered in the contract's shape by the receiver's error handler.
 *
 * With a store that has `recordMany` (every knex store does), the same route also takes batches
 * (receiver/batch.ts): a POST to its target with `batch` added to the query carries
 * `{effects: [{jobId, key?, qty?, body?, token}, ...]}` (1 to 100), signed over `batch` in the
 * token's place, and is answered `200 {results: [{status, body}, ...]}`, each effect as its own
 * request would have been. Every answer of the route names that target in `Leasehold-Batch`.
 */
export function fencedEffects<Tx>(options: FencedEffectsOptions<Tx>): Router {
  if (typeof options !== 'object' || options === null) {
    throw new TypeError(`fencedEffects takes {store, apply?, secret?, clock?}, not ${describeValue(options)}.`);
  }
  checkOptionNames('fencedEffects', options, FENCED_EFFECTS_OPTION_NAMES);
  const { store, secret, apply } = options;
  checkEffectStore(store);
  const clock = checkClock(options.clock);
  const logger = options.logger ?? pino({ level: 'error' }, process.stderr);
  if (secret !== undefined && typeof secret !== 'string')
    throw new TypeError(`fencedEffects: secret must be a string, not ${describeValue(secret)}.`);
  if (secret !== undefined && secret === '')
    throw new Error('fencedEffects: secret must not be empty; leave it out to disable signatures.');
  if (apply !== undefined && typeof apply !== 'function')
    throw new TypeError(
      `fencedEffects: apply must be a function (effect, tx) => Promise<void>, not ${describeValue(apply)}.`,
    );

  /**
   * Runs `work` with this request's own `apply`, and turns a failure of `apply` into
   * `apply_failed` only after the store has given up: inside the transaction the error stays as
   * thrown, so that the store's retry can recognise a deadlock or a busy database. Only the very
   * error this request's own `apply` threw, arriving here unchanged, is `apply_failed`; the
   * store's `busy` and the store's own failures keep their answers.
   */
  const withApply = async <T>(
    what: { jobId?: string; words: string },
    work: (apply?: ApplyEffect<Tx>) => Promise<T>,
  ): Promise<T> => {
    if (!apply) return work();
    const tracked = trackFailures(apply);
    try {
      return await work(tracked.apply);
    } catch (err) {
      if (err instanceof ReceiverError || !tracked.threw(err)) throw err;
      // Logged here, with the job and the stack, once. Not for a whole batch (no `jobId`): each of
      // its effects then runs alone, where a failing apply is logged with its job; a batch answers
      // that among its results, which nothing else logs. The error carries no `cause`, which would
      // have the error middleware log a single request's failure a second time.
      if (what.jobId !== undefined)
        logger.error({ err, jobId: what.jobId }, 'apply failed; the effect was not recorded');
      throw new ReceiverError(
        'apply_failed',
        `The effect for ${what.words} could not be applied, so nothing was recorded; retry the request.`,
      );
    }
  };
  const record = (request: EffectRequest): Promise<Recorded> =>
    withApply({ jobId: request.jobId, words: `job "${request.jobId}"` }, (tracked) =>
      recordEffect(store, request, clock, tracked),
    );
  const batches = store.recordMany !== undefined;

  const judged = (request: EffectRequest, { judgement, journal }: Recorded) => {
    options.metrics?.judged(judgement.outcome, request);
    const { jobId, key, qty, token } = request;
    logger.info({ jobId, key, qty, token, outcome: judgement.outcome, seq: journal.seq }, 'effect judged');
  };

  const checkSignature = (req: Request, token: number | typeof BATCH_TOKEN, raw: Buffer | undefined) => {
    if (secret === undefined) return;
    // The method and the target as the caller sent them (originalUrl: before any mount point was stripped).
    const signed = { method: req.method, path: req.originalUrl, token, body: raw ?? Buffer.alloc(0) };
    const check = verifySignature(secret, req.get(SIGNATURE_HEADER), signed, clock.now());
    if (!check.ok) {
      options.metrics?.signatureRefused();
      throw new ReceiverError('invalid_signature', check.reason);
    }
  };

  /** A batch: signed over `batch` in the token's place; each effect answered in `results`. */
  const handleBatch = async (req: Request, res: Response) => {
    const raw = rawBodyOf(req);
    checkSignature(req, BATCH_TOKEN, raw);
    const results = await judgeBatch(parseBatchBody(raw), {
      recordMany: (requests) =>
        withApply({ words: `one of the batch's ${requests.length} effects` }, (tracked) =>
          store.recordMany!(requests, clock, tracked),
        ),
      record: async (request) => {
        try {
          return await record(request);
        } catch (err) {
          if (!(err instanceof ReceiverError)) logger.error({ err, jobId: request.jobId }, 'unexpected error');
          throw err;
        }
      },
      judged,
    });
    res.status(200).json({ results });
  };

  const handle = async (req: Request, res: Response) => {
    // Every answer, a refusal included, says where batches go, so a sender learns it from any.
    if (batches) res.set(BATCH_HEADER, batchTargetOf(req.originalUrl));
    if (batches && isBatchTarget(req.originalUrl)) return handleBatch(req, res);
    const raw = rawBodyOf(req);
    const token = parseFencingToken(req.get(FENCING_TOKEN_HEADER));
    checkSignature(req, token, raw);
    const request: EffectRequest = { ...parseEffectBody(raw), token };
    const recorded = await record(request);
    judged(request, recorded);
    const { judgement } = recorded;
    if (judgement.outcome === 'fenced' || judgement.outcome === 'conflict') throw refusalOf(request, judgement);
    const answer = answerOf(request, judgement);
    if (judgement.outcome === 'duplicate') res.set(IDEMPOTENT_REPLAYED_HEADER, 'true');
    res.status(answer.status).json(answer.body);
  };

  const router = express.Router();
  router.use(rawJsonBody());
  router.use(handle);
  router.use(receiverErrors(logger));
  return router;
}
