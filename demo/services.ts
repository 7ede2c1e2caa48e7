// The services as separate processes, started in dependency order (queue, receiver and, for the
// demo, its mailer; then the gateway that points at them), and read back over their HTTP APIs
// at the end.
import { audit } from '../audit/index.js';
import { QueueClient } from '../queue/client.js';
import type { Child, ChildGroup } from './processes.js';
import type { FinalState, MailerState } from './verdict.js';
import type { Mail } from './mailer.js';
import { EMAIL_KEY, MAILER } from './worker-main.js';
import { ReceiverClient } from '../receiver/client.js';
import { FLAG_NAMES_VARIABLE } from '../platform/flags.js';

export interface ServiceUrls {
  queue: string;
  gateway: string;
  receiver: string;
  /** The demo's second downstream, when it was started. */
  mailer?: string;
}

export type ServiceName = keyof ServiceUrls;

export interface ServiceChildren {
  queue: Child;
  gateway: Child;
  receiver: Child;
  mailer?: Child;
}

export interface StartServicesOptions {
  cliPath: string;
  group: ChildGroup;
  host: string;
  ports: { queue: number; gateway: number; receiver: number };
  /** With `mailer`, the demo's mailer is started too, on a free port, and given to the gateway as `mailer`. */
  db: { queue: string; receiver: string; mailer?: string };
  logLevel: string;
  /** Where each service's stderr goes: a log file per service, or this process's stderr. */
  stderr(name: ServiceName): { file: string } | 'inherit';
  /** Shared by the gateway (signs) and the receiver (checks); none: unsigned. */
  secret?: string | undefined;
  /** Required by the queue and the gateway of their callers (the gateway presents it to the queue); none: open. */
  apiKey?: string | undefined;
  /** The flags the caller gives each service's own under, named in a failed start's line (`--port` → `--queue-port`). */
  flagNames?(name: ServiceName): Record<string, string>;
  /** Each service as it becomes ready. */
  onReady?(name: ServiceName, url: string, child: Child): void;
  readyTimeoutMs?: number;
}

export async function startServiceProcesses(
  options: StartServicesOptions,
): Promise<{ urls: ServiceUrls; children: ServiceChildren }> {
  const timeoutMs = options.readyTimeoutMs ?? 20_000;
  const env = {
    ...process.env,
    ...(options.secret === undefined ? {} : { LEASEHOLD_SECRET: options.secret }),
    ...(options.apiKey === undefined ? {} : { LEASEHOLD_API_KEY: options.apiKey }),
  };
  const common = (port: number) => ['--host', options.host, '--port', String(port), '--log-level', options.logLevel];
  const start = async (name: ServiceName, args: string[]) => {
    const child = options.group.spawn({
      name,
      cliPath: options.cliPath,
      args: [name === 'mailer' ? 'demo-mailer' : name, ...args],
      env: options.flagNames ? { ...env, [FLAG_NAMES_VARIABLE]: JSON.stringify(options.flagNames(name)) } : env,
      stderr: options.stderr(name),
    });
    const url = await child.waitForUrl(timeoutMs);
    options.onReady?.(name, url, child);
    return { child, url };
  };
  const mailerDb = options.db.mailer;
  const [queue, receiver, mailer] = await Promise.all([
    start('queue', [...common(options.ports.queue), '--db', options.db.queue]),
    start('receiver', [...common(options.ports.receiver), '--db', options.db.receiver]),
    mailerDb === undefined ? undefined : start('mailer', [...common(0), '--db', mailerDb]),
  ]);
  const gateway = await start('gateway', [
    ...common(options.ports.gateway),
    '--queue',
    queue.url,
    '--receiver',
    receiver.url,
    ...(mailer ? ['--downstream', `${MAILER}=${mailer.url}/effects`] : []),
  ]);
  return {
    urls: { queue: queue.url, gateway: gateway.url, receiver: receiver.url, ...(mailer ? { mailer: mailer.url } : {}) },
    children: {
      queue: queue.child,
      gateway: gateway.child,
      receiver: receiver.child,
      ...(mailer ? { mailer: mailer.child } : {}),
    },
  };
}

/** What the queue, the receiver and the mailer say at the end, from their HTTP APIs only. */
export async function readFinalState(
  urls: Pick<ServiceUrls, 'queue' | 'receiver' | 'mailer'>,
  apiKey?: string,
): Promise<FinalState> {
  const queue = new QueueClient(urls.queue, { apiKey });
  const receiver = new ReceiverClient(urls.receiver);
  // The mailer lists its effects and journal as the receiver does: the receiver's client reads them.
  const mailer = urls.mailer === undefined ? undefined : new ReceiverClient(urls.mailer);
  try {
    const [stats, jobs, totals, effects, journal, mailed] = await Promise.all([
      queue.stats(),
      queue.list({ limit: 1000 }),
      receiver.totals(),
      receiver.effects(),
      receiver.journal(),
      mailer && urls.mailer ? readMailer(mailer, urls.mailer) : undefined,
    ]);
    const downstreams = mailer ? [{ name: MAILER, url: mailer, keys: [EMAIL_KEY] }] : [];
    return {
      stats,
      jobs,
      totals,
      effects,
      journal,
      ...(mailed ? { mailer: mailed } : {}),
      audit: await audit({ queue, receiver, downstreams }),
    };
  } finally {
    queue.close();
    receiver.close();
    mailer?.close();
  }
}

async function readMailer(client: ReceiverClient, url: string): Promise<MailerState> {
  const [effects, journal, outbox] = await Promise.all([
    client.effects(),
    client.journal(),
    fetch(`${url}/outbox`).then(async (res) => {
      if (!res.ok) throw new Error(`the mailer's GET /outbox answered ${res.status}`);
      return (await res.json()) as { mails: Mail[] };
    }),
  ]);
  return { effects, journal, mails: outbox.mails };
}
