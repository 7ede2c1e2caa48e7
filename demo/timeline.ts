// The demo's words: one readable line per worker event or demo action, and the verdict table.
import { LOSS_WORDS, type WorkerLine } from '../worker/index.js';
import type { Check } from './verdict.js';

export interface TimelineEntry {
  /** Milliseconds since the demo started. */
  ms: number;
  /** `demo`, a service name, or a worker name. */
  who: string;
  text: string;
}

export function formatEntry(entry: TimelineEntry): string {
  return `${String(entry.ms).padStart(7)} ms  ${entry.who.padEnd(8)} ${entry.text}`;
}

/** What a worker event says, in a sentence; `t0` makes lease ends relative to the demo's start. */
export function describeEvent(e: WorkerLine, t0: number): string {
  const at = (epochMs: number) => `${epochMs - t0} ms`;
  switch (e.event) {
    case 'started':
      return `started: lease ${e.leaseMs} ms, renewed every ${e.heartbeatMs} ms`;
    case 'claimed':
      return `claimed ${e.job} (qty ${e.qty}) with token ${e.token}, lease until ${at(e.leaseUntil)}${e.via === 'finish' ? ' (with its last finish)' : ''}${e.attempt > 1 ? ` — attempt ${e.attempt}, taking it over` : ''}`;
    case 'renewed':
      return `renewed ${e.job} token ${e.token} until ${at(e.leaseUntil)}${e.stage ? ` (before ${e.stage})` : ''}`;
    case 'stalled':
      return `stalls ${e.ms} ms before ${e.before === 'send' ? 'sending' : 'finishing'} ${e.job} (token ${e.token})`;
    case 'sent':
      return e.outcome === 'applied'
        ? `sent ${e.job}${sentWhat(e)} with token ${e.token}: applied`
        : `sent ${e.job}${sentWhat(e)} with token ${e.token}: duplicate — already applied (token ${e.effectToken}), nothing added`;
    case 'send_failed':
      return `send of ${e.job} failed (${e.code}): ${e.error}`;
    case 'refused': {
      const now = e.current
        ? `; the job has token ${e.current.token}, owner ${e.current.owner ?? 'none'}, ${e.current.status}`
        : '';
      return `${e.op} of ${e.job} with token ${e.token} REFUSED: ${e.status} ${e.code}${e.reason ? ` (${e.reason})` : ''}${now}`;
    }
    case 'turn':
      return `starts ${e.job} (token ${e.token}) after ${e.waitedMs} ms waiting for a free handler`;
    case 'finished':
      return `finished ${e.job} (token ${e.token})`;
    case 'failed':
      return `failed ${e.job} (token ${e.token}): ${e.error} — now ${e.status}`;
    case 'lost':
      return `LOST its lease on ${e.job} (token ${e.token}), found during ${e.during}: ${LOSS_WORDS[e.reason]}`;
    case 'call_failed':
      return `${e.op} of ${e.job} could not reach the queue: ${e.error}`;
    case 'claim_failed':
      return `claim failed: ${e.error}`;
    case 'stopping':
      return `stopping: no new claims; ${e.running} running, given ${e.graceMs} ms`;
    case 'grace_over':
      return `grace time over with ${e.running} still running: releasing their leases`;
    case 'released':
      return `released ${e.job} (token ${e.token}): claimable again at once, the attempt given back`;
    case 'output':
      return `writes its output for ${e.job} in ${e.path}`;
    case 'cleaned':
      return `removed the stale output of ${e.job}, token ${e.removed.join(', ')}: it can no longer win`;
    case 'exiting':
      return `second ${e.signal}: exiting at once with ${e.running} running`;
    case 'stopped':
      return `stopped: ${e.claimed} claimed, ${e.finished} finished, ${e.failed} failed, ${e.lost} lost${e.released ? `, ${e.released} released` : ''}`;
    default:
      return JSON.stringify(e);
  }
}

/** The verdict as an aligned table: one row per check, expected next to actual. */
/** ` qty 3`, or ` to billing key charge qty 3` for an effect that names its downstream and key. */
function sentWhat(e: { to?: string; key?: string; qty?: number }): string {
  return `${e.to !== undefined ? ` to ${e.to}` : ''}${e.key !== undefined ? ` key ${e.key}` : ''}${e.qty !== undefined ? ` qty ${e.qty}` : ''}`;
}

export function formatChecks(checks: readonly Check[]): string[] {
  const head = { label: 'check', expected: 'expected', actual: 'actual', mark: 'result' };
  const rows = checks.map((c) => ({
    label: c.label,
    expected: c.expected,
    actual: c.actual,
    mark: c.ok === undefined ? '' : c.ok ? 'ok' : 'FAIL',
  }));
  const width = (key: 'label' | 'expected' | 'actual') => Math.max(head[key].length, ...rows.map((r) => r[key].length));
  const [w1, w2, w3] = [width('label'), width('expected'), width('actual')];
  const line = (r: typeof head) =>
    `  ${r.label.padEnd(w1)}  ${r.expected.padEnd(w2)}  ${r.actual.padEnd(w3)}  ${r.mark}`.trimEnd();
  return [line(head), `  ${'-'.repeat(w1)}  ${'-'.repeat(w2)}  ${'-'.repeat(w3)}  ------`, ...rows.map(line)];
}
