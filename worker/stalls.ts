// The stalls `leasehold worker` (and the demo's workers) can be told to make: a pause before the
// send or the finish of the Nth lease this worker claims, announced by a `stalled` line. The
// demo uses them to make a zombie: a holder that wakes up after its lease was taken over.
import { setTimeout as sleep } from 'node:timers/promises';
import type { StalledEvent, WorkerEvent } from './events.js';
import type { WorkerHooks } from './types.js';
import { checkRequiredOptions, type OptionNames } from '../platform/option-names.js';

export interface StallOptions {
  /** The worker's name, on each `stalled` line. */
  name: string;
  stallMs: number;
  /** Ordinals (1 = the first lease claimed) of the leases to stall before their send, and before their finish. */
  beforeSend: number[];
  beforeFinish: number[];
  /** Writes a `stalled` line at once. */
  announce(line: StalledEvent): void;
}

export interface Stalls {
  hooks: WorkerHooks;
  /** Give it every worker event: claims number the leases, a job's end forgets its number. */
  observe(event: WorkerEvent): void;
}

const STALL_OPTION_NAMES: OptionNames<StallOptions> = {
  name: true,
  stallMs: true,
  beforeSend: true,
  beforeFinish: true,
  announce: true,
};

export function stallHooks(options: StallOptions): Stalls {
  checkRequiredOptions('stallHooks', options, STALL_OPTION_NAMES);
  // Each lease's ordinal among this worker's claims, so a stall finds its job whatever else runs.
  let claims = 0;
  const ordinals = new Map<string, number>();
  const leaseKey = (lease: { id: string; token: number }) => `${lease.token}:${lease.id}`;
  // One pause per lease and stage: a handler's several sends wait in the same one.
  const pauses = new Map<string, Promise<void>>();
  const stall =
    (before: 'send' | 'finish', wanted: number[]) =>
    (lease: { id: string; token: number }): Promise<void> | undefined => {
      if (!wanted.includes(ordinals.get(leaseKey(lease)) ?? 0)) return undefined;
      const id = `${before}:${leaseKey(lease)}`;
      const running = pauses.get(id);
      if (running) return running;
      // The pause starts before it is announced: whoever freezes this process on seeing the line
      // freezes it inside the pause, whose end is then already due when the process resumes.
      // It is announced once the handler's code of this turn has run, so every send the handler
      // started with this one is waiting in the pause too: announced at once, a freeze could land
      // between two sends, and the second would find the lease lost on waking and never be sent.
      // Deliberately not abortable: it models a step the worker cannot interrupt.
      const pause = sleep(options.stallMs);
      pauses.set(id, pause);
      setImmediate(() =>
        options.announce({
          t: Date.now(),
          worker: options.name,
          event: 'stalled',
          job: lease.id,
          token: lease.token,
          before,
          ms: options.stallMs,
        }),
      );
      return pause;
    };
  return {
    hooks: { beforeSend: stall('send', options.beforeSend), beforeFinish: stall('finish', options.beforeFinish) },
    observe(event) {
      if (event.event === 'claimed') {
        claims += 1;
        ordinals.set(leaseKey({ id: event.job, token: event.token }), claims);
      } else if (
        event.event === 'finished' ||
        event.event === 'failed' ||
        event.event === 'lost' ||
        event.event === 'released'
      ) {
        // No stall is asked for after a job's end: its ordinal and pauses are not kept for ever.
        const key = leaseKey({ id: event.job, token: event.token });
        ordinals.delete(key);
        pauses.delete(`send:${key}`);
        pauses.delete(`finish:${key}`);
      }
    },
  };
}
