// `startSystem`: the queue, the gateway and the receiver (and any named downstreams) in this
// process on free ports of 127.0.0.1, in memory by default, on one clock, as one handle with their
// URLs and clients, the stub's helpers, the assertions, `reset()` and `close()`.
import { startGateway, GatewayClient, type GatewayService, type GatewayServiceOptions } from '../gateway/index.js';
import { startQueue, systemClock, QueueClient, type Clock, type Job, type QueueService } from '../queue/index.js';
import { startReceiver, ReceiverClient, type ReceiverHandle } from '../receiver/index.js';
import type { Worker, WorkerOptions } from '../worker/index.js';
import { workerMadeBy } from '../worker/worker.js';
import { ManualClock } from './clock.js';
import { checkChoice, checkSystemOptions } from './options.js';
import { checkJobIdArgument as checkJobId } from '../platform/describe-value.js';
import {
  expectExactlyOnceAt,
  expectNoEffectAt,
  waitForEffectAt,
  type KeyChoice,
  type ReadableDownstream,
  type SystemEffect,
} from './expect.js';

/** The downstream a send without `to` goes to: the receiver. */
const RECEIVER = 'receiver';

/** Another downstream: a receiver stub the kit starts (in memory), or an endpoint the test runs itself. */
export type DownstreamOption = 'stub' | { url: string; secret?: string | undefined };

/**
 * The grace a kit worker's running job gets when it is stopped, `close()` included, unless the
 * test gives its own: a handler that never ends (a test that failed before it let go) then holds
 * `close()` a second, well inside a test runner's hook timeout (vitest's 10 s), not a worker's
 * default 10 s.
 */
const KIT_GRACE_MS = 1_000;

export interface SystemOptions {
  /**
   * Where the queue and the receiver keep their data: `:memory:` (the default), a SQLite file
   * both open (their tables apart), or a `postgres://` URL (with `?schema=NAME`) both use.
   * Named stub downstreams are always in memory.
   */
  db?: string | undefined;
  /**
   * `'real'` (the default): the system's clock. `'manual'`: a ManualClock starting at the real
   * time now, shared by every part and by the workers made with `system.worker`; time moves only
   * by `system.clock.advance(ms)`. Or a clock of your own (a ManualClock is moved by you).
   */
  clock?: 'real' | 'manual' | Clock | undefined;
  /** The gateway signs every forwarded request with it and the stubs require the signature. */
  secret?: string | undefined;
  /** The queue and the gateway require it (`Authorization: Bearer`); the kit's clients and workers present it. */
  apiKey?: string | undefined;
  /**
   * More downstreams by name, besides `receiver`: `'stub'` starts another receiver stub, `{url}`
   * names an effect endpoint (path included) the test runs itself. Sends reach them by `to`.
   */
  downstreams?: Readonly<Record<string, DownstreamOption>> | undefined;
}

/** The system's clock: `advance` moves a manual one and is refused on the real one. */
export interface SystemClock extends Clock {
  /** True when time moves only by `advance`. */
  readonly manual: boolean;
  /**
   * Moves a manual clock `ms` forward at once; timers that fell due meanwhile (the workers'
   * renewals and their estimates of a lease's end) then fire. Returns the new time. On the real
   * clock it throws: use `system.expireLease(jobId)` there.
   */
  advance(ms: number): number;
}

/** The receiver stub's helpers: reads straight from its store, waiting, faults and reset. */
export type StubHelpers = Omit<ReceiverHandle, 'close' | 'url' | 'port'>;

export interface SystemDownstream {
  name: string;
  /** The effect endpoint the gateway forwards to, path included. */
  url: string;
  /** The stub behind it, when the kit started one; undefined for an endpoint of the test's own. */
  stub: StubHelpers | undefined;
}

/** Which downstreams an assertion looks at (one name or several), and which of a job's effects. */
export interface DownstreamChoice {
  to?: string | readonly string[];
  /**
   * The effect's key, `null` for the default effect, or several of them. Left out: the default
   * effect for `expectExactlyOnce` and `waitForEffect`, every effect of the job for `expectNoEffect`.
   */
  key?: KeyChoice;
}

export interface System {
  /** The services' base URLs, without a trailing slash. */
  readonly urls: { readonly queue: string; readonly gateway: string; readonly receiver: string };
  readonly queue: QueueClient;
  readonly gateway: GatewayClient;
  readonly receiver: ReceiverClient;
  /** The receiver stub's helpers (`effects()`, `journal()`, `waitForEffect`, `faults`...). */
  readonly stub: StubHelpers;
  /** Every downstream by name, `receiver` included. */
  readonly downstreams: Readonly<Record<string, SystemDownstream>>;
  readonly clock: SystemClock;
  readonly apiKey: string | undefined;
  /**
   * A worker on this system (its URLs, API key and clock filled in), closed by `close()`. An option
   * set to undefined is left out: the system's own stays.
   */
  worker(name: string, options?: SystemWorkerOptions): Worker;
  /**
   * The lease of `jobId` ends now, on the queue's clock: its holder is refused from then on, and
   * the job is claimable. For the real clock; on a manual one `clock.advance` does the same.
   */
  expireLease(jobId: string): Promise<Job>;
  /**
   * Resolves when every done job took effect exactly once at the downstream(s) named by `to`
   * (default `receiver`): its default effect with its qty, or each effect `key` names; rejects
   * with an ExpectationError listing, job by job and key by key, what was expected and what is.
   */
  expectExactlyOnce(options?: DownstreamChoice): Promise<void>;
  /** Rejects when the job has an effect (under `key`, when given) at any of the stubs (or those named by `to`). */
  expectNoEffect(jobId: string, options?: DownstreamChoice): Promise<void>;
  /**
   * The job's effect (its default effect, or the one `key` names) once any of the stubs (or
   * those named by `to`) has it; rejects after `timeoutMs` (default 5000).
   */
  waitForEffect(jobId: string, options?: DownstreamChoice & { timeoutMs?: number }): Promise<SystemEffect>;
  /** Erases every job, effect and journal entry, and the stubs' queued faults: a fresh system for the next case. */
  reset(): Promise<void>;
  /**
   * Closes the workers made with `worker()` (each stops its runs as their `signal` would, and waits
   * for them), the clients and the services. Safe to call twice.
   */
  close(): Promise<void>;
}

/** A worker's options as `system.worker` takes them: the system fills in its URLs, API key and clock. */
export type SystemWorkerOptions = {
  [K in keyof Omit<WorkerOptions, 'name'>]?: WorkerOptions[K] | undefined;
};

interface StartedStub {
  name: string;
  handle: ReceiverHandle;
  client: ReceiverClient;
}

export async function startSystem(options: SystemOptions = {}): Promise<System> {
  checkSystemOptions(options);
  const { parts: clock, handle: handleClock } = clocksOf(options.clock ?? 'real');
  const db = options.db ?? ':memory:';
  const { secret, apiKey } = options;
  const extra = Object.entries(options.downstreams ?? {});
  if (extra.some(([name]) => name === RECEIVER)) {
    throw new RangeError(`downstreams must not name "${RECEIVER}": the system starts that one itself.`);
  }

  const closers: Array<() => Promise<void>> = [];
  const closeAll = async () => {
    const results = await Promise.allSettled(
      closers
        .splice(0)
        .reverse()
        .map((close) => close()),
    );
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
  };
  try {
    const startStub = async (name: string, stubDb: string): Promise<StartedStub> => {
      const handle = await startReceiver({ db: stubDb, testMode: true, clock, ...(secret ? { secret } : {}) });
      const client = new ReceiverClient(handle.url);
      closers.push(async () => {
        client.close();
        await handle.close();
      });
      return { name, handle, client };
    };
    // Every start is awaited, the failed ones too, so nothing is left listening when one fails.
    const queueStarted = startQueue({ db, clock, testMode: true, apiKey }).then((service) => {
      closers.push(() => service.close());
      return service;
    });
    const receiverStarted = startStub(RECEIVER, db);
    const stubsStarted = extra.filter(([, option]) => option === 'stub').map(([name]) => startStub(name, ':memory:'));
    const settled = await Promise.allSettled([queueStarted, receiverStarted, ...stubsStarted]);
    const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failed) throw failed.reason;
    const [queue, receiver, stubs] = [await queueStarted, await receiverStarted, await Promise.all(stubsStarted)];
    const ownEndpoints = extra.flatMap(([name, option]) => (option === 'stub' ? [] : [{ name, ...option }]));
    const gateway = await startGateway({
      queueUrl: queue.url,
      receiverUrl: receiver.handle.url,
      secret,
      apiKey,
      clock,
      ...downstreamsOption(stubs, ownEndpoints),
    });
    closers.push(() => gateway.close());
    return systemHandle({ clock, handleClock, apiKey, queue, gateway, receiver, stubs, ownEndpoints, closeAll });
  } catch (err) {
    await closeAll().catch(() => {});
    throw err;
  }
}

/** The gateway's named downstreams (`--downstream NAME=URL`): each stub's effect endpoint and any endpoint of the test's own. */
function downstreamsOption(
  stubs: readonly StartedStub[],
  own: ReadonlyArray<{ name: string; url: string; secret?: string }>,
): Partial<GatewayServiceOptions> {
  if (stubs.length === 0 && own.length === 0) return {};
  const downstreams: Record<string, { url: string; secret?: string }> = {};
  // A stub checks the gateway's own secret, which signs for every downstream without one.
  for (const stub of stubs) downstreams[stub.name] = { url: `${stub.handle.url}/effects` };
  for (const endpoint of own)
    downstreams[endpoint.name] = { url: endpoint.url, ...(endpoint.secret ? { secret: endpoint.secret } : {}) };
  return { downstreams };
}

function systemHandle(parts: {
  clock: Clock;
  handleClock: SystemClock;
  apiKey: string | undefined;
  queue: QueueService;
  gateway: GatewayService;
  receiver: StartedStub;
  stubs: readonly StartedStub[];
  ownEndpoints: ReadonlyArray<{ name: string; url: string }>;
  closeAll(): Promise<void>;
}): System {
  const { clock, apiKey, queue, gateway, receiver } = parts;
  const allStubs = [receiver, ...parts.stubs];
  const queueClient = new QueueClient(queue.url, { apiKey });
  const gatewayClient = new GatewayClient(gateway.url, { apiKey });
  const workers = new Set<Worker>();
  let closing: Promise<void> | undefined;
  /** Refuses a call once close() was called: the parts are gone, and their own errors would not say so. */
  const open = (method: string) => {
    if (closing) throw new Error(`system.${method}: the system is closed; start another with startSystem().`);
  };
  const downstreams: Record<string, SystemDownstream> = {};
  for (const stub of allStubs) {
    downstreams[stub.name] = {
      name: stub.name,
      url: `${stub.handle.url}/effects`,
      stub: helpersOf(stub.handle, (method) => open(`downstreams.${stub.name}.stub.${method}`)),
    };
  }
  for (const endpoint of parts.ownEndpoints) {
    downstreams[endpoint.name] = { name: endpoint.name, url: endpoint.url, stub: undefined };
  }
  const readable = (choice: DownstreamChoice | undefined, fallback: readonly string[]): ReadableDownstream[] => {
    const names = choice?.to === undefined ? fallback : typeof choice.to === 'string' ? [choice.to] : choice.to;
    return names.map((name) => {
      const stub = allStubs.find((s) => s.name === name);
      if (stub) {
        return {
          name,
          client: stub.client,
          effect: (jobId, key) => stub.handle.effect(jobId, key),
          effects: (jobId) => stub.handle.effects({ jobId }),
        };
      }
      throw new RangeError(
        name in downstreams
          ? `downstream "${name}" is an endpoint of the test's own: the kit can read only the stubs it started (${allStubs.map((s) => `"${s.name}"`).join(', ')}).`
          : `there is no downstream "${name}"; the system has ${Object.keys(downstreams)
              .map((n) => `"${n}"`)
              .join(', ')}.`,
      );
    });
  };
  const stubNames = allStubs.map((s) => s.name);

  return {
    urls: { queue: queue.url, gateway: gateway.url, receiver: receiver.handle.url },
    queue: queueClient,
    gateway: gatewayClient,
    receiver: receiver.client,
    stub: helpersOf(receiver.handle, (method) => open(`stub.${method}`)),
    downstreams,
    clock: parts.handleClock,
    apiKey,
    worker: (name, options = {}) => {
      open('worker');
      if (typeof options === 'object' && options !== null && Object.hasOwn(options, 'name')) {
        throw new RangeError(
          "system.worker takes the worker's name as its first argument, not in its options: leave name out of them.",
        );
      }
      // An option set to undefined is left out, as a worker takes it: it keeps the system's own
      // (its clock above all), where spreading it would put undefined in its place.
      const given =
        typeof options === 'object' && options !== null
          ? Object.fromEntries(Object.entries(options).filter(([, value]) => value !== undefined))
          : options;
      const worker = workerMadeBy('system.worker', {
        queueUrl: queue.url,
        gatewayUrl: gateway.url,
        apiKey,
        clock,
        graceMs: KIT_GRACE_MS,
        ...given,
        name,
      });
      workers.add(worker);
      return worker;
    },
    expireLease: async (jobId) => {
      open('expireLease');
      checkJobId('expireLease', jobId);
      return queue.expireLease(jobId);
    },
    expectExactlyOnce: async (choice) => {
      open('expectExactlyOnce');
      checkChoice('expectExactlyOnce', choice);
      for (const downstream of readable(choice, [RECEIVER]))
        await expectExactlyOnceAt(queueClient, downstream, apiKey, choice?.key);
    },
    expectNoEffect: async (jobId, choice) => {
      open('expectNoEffect');
      checkJobId('expectNoEffect', jobId);
      checkChoice('expectNoEffect', choice);
      return expectNoEffectAt(jobId, readable(choice, stubNames), choice?.key);
    },
    waitForEffect: async (jobId, choice) => {
      open('waitForEffect');
      checkJobId('waitForEffect', jobId);
      checkChoice('waitForEffect', choice, ['timeoutMs']);
      return waitForEffectAt(jobId, readable(choice, stubNames), choice?.timeoutMs ?? 5_000, choice?.key);
    },
    reset: async () => {
      open('reset');
      await Promise.all([queue.reset(), ...allStubs.map((s) => s.handle.reset())]);
    },
    close: () =>
      (closing ??= (async () => {
        await Promise.all([...workers].map((worker) => worker.close()));
        queueClient.close();
        gatewayClient.close();
        await parts.closeAll();
      })()),
  };
}

function helpersOf(handle: ReceiverHandle, open: (method: string) => void): StubHelpers {
  const opened =
    <A extends unknown[], R>(method: string, call: (...args: A) => Promise<R>) =>
    async (...args: A): Promise<R> => {
      open(method);
      return call(...args);
    };
  return {
    effects: opened('effects', (filter) => handle.effects(filter)),
    effect: opened('effect', (jobId: string, key?: string) => handle.effect(jobId, key)),
    totals: opened('totals', () => handle.totals()),
    journal: opened('journal', () => handle.journal()),
    waitForEffect: opened('waitForEffect', (jobId: string, options?: { timeoutMs?: number; key?: string }) =>
      handle.waitForEffect(jobId, options),
    ),
    reset: opened('reset', () => handle.reset()),
    faults: handle.faults,
  };
}

/** The clock every part runs on, and the one the handle shows (with `advance`). */
function clocksOf(option: 'real' | 'manual' | Clock): { parts: Clock; handle: SystemClock } {
  const parts = option === 'manual' ? new ManualClock() : option === 'real' ? systemClock : option;
  if (parts instanceof ManualClock) return { parts, handle: parts };
  return {
    parts,
    handle: {
      manual: false,
      now: () => parts.now(),
      advance: () => {
        throw new Error(
          'The system runs on a clock the kit does not move: start it with clock: "manual" to move time, or call system.expireLease(jobId) to end a lease now.',
        );
      },
    },
  };
}
