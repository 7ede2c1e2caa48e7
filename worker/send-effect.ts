// `ctx.send`: what it takes (a qty, or {to?, key?, qty?, body?} with a body that is a JSON value),
// checked before anything is sent; then one effect through the gateway under the lease, its
// answer reported as an event, a refusal of the lease reported to the keeper.
import { GatewayError } from '../gateway/client.js';
import { describeValue } from '../platform/describe-value.js';
import { checkOptionNames, type OptionNames } from '../platform/option-names.js';
import { runHook } from './hooks.js';
import { jsonValueProblem } from './json-value.js';
import type { LeaseKeeper } from './lease-keeper.js';
import { errorMessage, refusalOf } from './rules.js';
import type { RunLeaseDeps } from './run-lease.js';
import type { EffectInput, SendOutcome } from './types.js';

/**
 * Sends one effect under the keeper's lease. `abandoned`: the error a send still held in its
 * `beforeSend` hook ends with once the grace after a stop is over.
 */
export async function sendEffect(
  keeper: LeaseKeeper,
  deps: RunLeaseDeps,
  input: number | EffectInput | undefined,
  abandoned: () => Error,
): Promise<SendOutcome> {
  checkEffectInput(input);
  return keeper.send(async (signal) => {
    const lease = keeper.lease;
    const ref = { job: lease.id, token: lease.token };
    const effect = effectOf(input, lease.qty);
    await runHook(deps.options.hooks.beforeSend, lease, deps, abandoned);
    try {
      const sent = await deps.gateway.send(
        { jobId: lease.id, owner: lease.owner, token: lease.token, ...effect },
        { signal },
      );
      deps.emit({ event: 'sent', ...ref, ...effectRef(effect), outcome: sent.outcome, effectToken: sent.effect.token });
      return sent;
    } catch (err) {
      if (signal.aborted && err === signal.reason) {
        deps.emit({ event: 'send_failed', ...ref, code: 'aborted', error: `aborted: ${errorMessage(err)}` });
        throw err;
      }
      const refusal = refusalOf(err);
      if (err instanceof GatewayError && (refusal || err.status < 500)) {
        deps.emit({
          event: 'refused',
          op: 'send',
          ...ref,
          status: err.status,
          code: err.code,
          ...(refusal ? { reason: refusal.reason } : {}),
          ...(refusal?.current ? { current: refusal.current } : {}),
          error: err.message,
        });
      } else {
        deps.emit({
          event: 'send_failed',
          ...ref,
          code: err instanceof GatewayError ? err.code : 'error',
          error: errorMessage(err),
        });
      }
      if (refusal) throw await keeper.refused(refusal, 'send');
      throw err;
    }
  });
}

const EFFECT_INPUT_NAMES: OptionNames<EffectInput> = { to: true, key: true, qty: true, body: true };

/**
 * Refuses what `ctx.send` cannot mean, before anything is sent: a misspelt field (`keyy`) would
 * otherwise be dropped and the job's default effect sent in its place, once and for good; a body
 * that is not a JSON value would be sent changed (a function left out, NaN as null, a Date as a
 * string), and the downstream would record what the handler never meant.
 */
function checkEffectInput(input: unknown): void {
  if (input === undefined || typeof input === 'number') return;
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    throw new TypeError(`ctx.send takes a qty (a number) or {to?, key?, qty?, body?}, not ${describeValue(input)}.`);
  }
  checkOptionNames('ctx.send', input, EFFECT_INPUT_NAMES);
  const { body } = input as EffectInput;
  const problem = body === undefined ? undefined : jsonValueProblem(body, 'body');
  if (problem !== undefined) {
    throw new TypeError(`ctx.send's body must be a JSON value, but ${problem}. Nothing was sent.`);
  }
}

/**
 * What `ctx.send` was given, as the gateway's fields: a number is the default effect's qty; the
 * default effect (no key) carries the job's qty unless told otherwise; a keyed one only what it
 * was given. Fields left out stay out of the request.
 */
function effectOf(input: number | EffectInput | undefined, jobQty: number): EffectInput {
  if (input === undefined || typeof input === 'number') return { qty: input ?? jobQty };
  const { to, key, qty, body } = input;
  return {
    ...(to !== undefined ? { to } : {}),
    ...(key !== undefined ? { key } : {}),
    ...(qty !== undefined ? { qty } : key === undefined ? { qty: jobQty } : {}),
    ...(body !== undefined ? { body } : {}),
  };
}

/** The effect's fields on the `sent` event: only those given (no body; it may be large). */
function effectRef(effect: EffectInput): { to?: string; key?: string; qty?: number } {
  return {
    ...(effect.to !== undefined ? { to: effect.to } : {}),
    ...(effect.key !== undefined ? { key: effect.key } : {}),
    ...(effect.qty !== undefined ? { qty: effect.qty } : {}),
  };
}
